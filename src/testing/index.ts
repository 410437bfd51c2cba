export type {
  ScriptedError,
  ScriptedModel,
  ScriptedModelOptions,
  ScriptedReply,
  ScriptedResponder,
  ScriptedStep,
} from "./scripted-model.js";
export { scriptedModel } from "./scripted-model.js";
