import type { Tool } from "../tool.js";
import { calculator } from "./calculator.js";
import { convertTemperature } from "./convert-temperature.js";
import { getCurrentTime } from "./get-current-time.js";

export { calculator, evaluateExpression, formatNumber } from "./calculator.js";
export { convertTemperature, convertTemperatureValue, type TemperatureUnit } from "./convert-temperature.js";
export { formatTimeInZone, getCurrentTime, resolveTimeZone } from "./get-current-time.js";

/** The built-in tools, in the fixed order sent to the model: calculator, get_current_time, convert_temperature. */
export function builtinTools(): Tool[] {
  return [calculator, getCurrentTime, convertTemperature];
}
