/**
 * `agentloop-runtime/openai`: the OpenAI adapters, Chat Completions (`openAIChatModel`, for every
 * OpenAI-compatible server) and the Responses API (`openAIResponsesModel`). Only these and their
 * options: the request mapping and stream assembly behind them are not part of the package's API.
 */
export { type OpenAIChatModelOptions, openAIChatModel } from "./openai-chat.js";
export { type OpenAIResponsesModelOptions, openAIResponsesModel } from "./openai-responses.js";
