/**
 * `agentloop-runtime/openai`: the OpenAI adapters, Chat Completions (`openAIChatModel`, for every
 * OpenAI-compatible server) and the Responses API (`openAIResponsesModel`).
 */
export * from "./openai-chat.js";
export {
  isReasoningModel,
  type OpenAIResponsesModelOptions,
  type OutputRef,
  openAIResponsesModel,
  RESPONSES_DATA_KEY,
  type ReasoningRef,
  type ResponsesData,
  type ResponsesRequestOptions,
  ResponsesStreamAssembler,
  toResponsesInput,
  toResponsesRequestBody,
} from "./openai-responses.js";
