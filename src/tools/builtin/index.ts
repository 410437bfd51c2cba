import type { Tool } from "../tool.js";
import { calculator } from "./calculator.js";
import { convertTemperature } from "./convert-temperature.js";
import { getCurrentTime } from "./get-current-time.js";

export { calculator } from "./calculator.js";
export { convertTemperature } from "./convert-temperature.js";
export { getCurrentTime } from "./get-current-time.js";

/** The built-in tools, in the fixed order sent to the model: calculator, get_current_time, convert_temperature. */
export function builtinTools(): Tool[] {
  return [calculator, getCurrentTime, convertTemperature];
}
