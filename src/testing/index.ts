export type { ReplayOptions } from "../record/http.js";
export { replayModel, replayTools } from "../record/replay.js";
export { DEMO_QUESTIONS, demoModel } from "./demo-model.js";
export type {
  FakeAnthropicReply,
  FakeAnthropicResponder,
  FakeAnthropicResponse,
  FakeAnthropicServer,
  FakeAnthropicToolCall,
} from "./fake-anthropic-server.js";
export { startFakeAnthropicServer } from "./fake-anthropic-server.js";
export type { FakeFault } from "./fake-http.js";
export type {
  FakeOpenAIServer,
  FakeReply,
  FakeRequest,
  FakeResponder,
  FakeResponse,
  FakeToolCall,
} from "./fake-openai-server.js";
export { startFakeOpenAIServer } from "./fake-openai-server.js";
export type {
  FakeResponsesReply,
  FakeResponsesResponder,
  FakeResponsesResponse,
  FakeResponsesServer,
} from "./fake-responses-server.js";
export { startFakeResponsesServer } from "./fake-responses-server.js";
export type {
  ScriptedError,
  ScriptedModel,
  ScriptedModelOptions,
  ScriptedReply,
  ScriptedResponder,
  ScriptedStep,
} from "./scripted-model.js";
export { scriptedModel } from "./scripted-model.js";
