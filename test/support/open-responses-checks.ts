/**
 * The Open Responses compliance checks (github.com/openresponses/openresponses, bin/compliance-test.ts),
 * written here from its specification: each check sends the request its namesake in the suite
 * sends and validates the response object (every field the spec requires, with its type) and, for
 * a stream, every event (a type the spec lists, a sequence number, the response of the final one).
 * Ids are the suite's; `compact` and `streaming-agent-tools` are ours.
 */
import { z } from "zod";

const int = z.number().int();
const usage = z.object({
  input_tokens: int,
  output_tokens: int,
  total_tokens: int,
  input_tokens_details: z.object({ cached_tokens: int }),
  output_tokens_details: z.object({ reasoning_tokens: int }),
});
const outputItem = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("message"),
    id: z.string(),
    role: z.literal("assistant"),
    status: z.string(),
    content: z.array(
      z.object({ type: z.literal("output_text"), text: z.string(), annotations: z.array(z.unknown()) }),
    ),
  }),
  z.object({
    type: z.literal("function_call"),
    id: z.string(),
    call_id: z.string(),
    name: z.string(),
    arguments: z.string(),
    status: z.string(),
  }),
  z.object({ type: z.literal("reasoning"), id: z.string(), summary: z.array(z.unknown()) }),
]);
/** The response object as the specification requires it. */
const responseObject = z.object({
  id: z.string(),
  object: z.literal("response"),
  created_at: int,
  completed_at: int.nullable(),
  status: z.string(),
  incomplete_details: z.object({ reason: z.string() }).nullable(),
  model: z.string(),
  previous_response_id: z.string().nullable(),
  instructions: z.string().nullable(),
  output: z.array(outputItem),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  tools: z.array(z.object({ type: z.string() }).loose()),
  tool_choice: z.union([z.enum(["none", "auto", "required"]), z.object({ type: z.string() }).loose()]),
  truncation: z.enum(["auto", "disabled"]),
  parallel_tool_calls: z.boolean(),
  text: z.object({ format: z.object({ type: z.string() }).loose() }).loose(),
  top_p: z.number(),
  presence_penalty: z.number(),
  frequency_penalty: z.number(),
  top_logprobs: int,
  temperature: z.number(),
  reasoning: z.object({}).loose().nullable(),
  usage: usage.nullable(),
  max_output_tokens: int.nullable(),
  max_tool_calls: int.nullable(),
  store: z.boolean(),
  background: z.boolean(),
  service_tier: z.string(),
  metadata: z.unknown(),
  safety_identifier: z.string().nullable(),
  prompt_cache_key: z.string().nullable(),
});

/** The stream events the specification lists. */
const EVENT_TYPES = new Set(
  [
    "created",
    "queued",
    "in_progress",
    "completed",
    "failed",
    "incomplete",
    "output_item.added",
    "output_item.done",
    "content_part.added",
    "content_part.done",
    "output_text.delta",
    "output_text.done",
    "refusal.delta",
    "refusal.done",
    "function_call_arguments.delta",
    "function_call_arguments.done",
    "reasoning_summary_part.added",
    "reasoning_summary_part.done",
    "reasoning_text.delta",
    "reasoning_text.done",
    "reasoning_summary_text.delta",
    "reasoning_summary_text.done",
    "output_text.annotation.added",
  ].map((name) => `response.${name}`),
).add("error");

type Body = Record<string, unknown>;
type Event = { type: string; [field: string]: unknown };

const WEATHER = {
  type: "function",
  name: "get_weather",
  description: "The current weather of a place.",
  parameters: {
    type: "object",
    properties: { location: { type: "string", description: "A city, e.g. Lyon" } },
    required: ["location"],
  },
};
const PIXEL =
  "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

function problems(schema: z.ZodType, value: unknown, where: string): string[] {
  const parsed = schema.safeParse(value);
  return parsed.success ? [] : parsed.error.issues.map((i) => `${where}${i.path.join(".")}: ${i.message}`);
}

/** A client of the server under test: POST a request, read the response object (or the stream's last). */
class Client {
  constructor(readonly base: string) {}

  async create(body: Body): Promise<{ response: Body; events: Event[]; errors: string[] }> {
    const res = await fetch(`${this.base}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) return { response: {}, events: [], errors: [`HTTP ${res.status}: ${text}`] };
    if (body.stream !== true) {
      const response = JSON.parse(text) as Body;
      return { response, events: [], errors: problems(responseObject, response, "") };
    }
    const events = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1] as string) as Event);
    const errors: string[] = [];
    let response: Body = {};
    for (const event of events) {
      if (!EVENT_TYPES.has(event.type))
        errors.push(`event '${event.type}' is not one the specification lists`);
      if (!Number.isInteger(event.sequence_number))
        errors.push(`event '${event.type}' has no sequence_number`);
      if (/^response\.(completed|failed|incomplete)$/.test(event.type)) response = event.response as Body;
    }
    errors.push(...problems(responseObject, response, "final response: "));
    return { response, events, errors };
  }
}

const outputs = (response: Body) => (response.output ?? []) as Body[];
const hasOutput = (response: Body) => (outputs(response).length > 0 ? [] : ["the response has no output"]);
const completed = (response: Body) =>
  response.status === "completed" ? [] : [`status is ${String(response.status)}, not completed`];
const hasItem = (type: string) => (response: Body) =>
  outputs(response).some((item) => item.type === type) ? [] : [`no output item of type ${type}`];

/** One check: its id and what it found wrong (nothing: it passed). */
export interface Check {
  id: string;
  run(client: Client, model: string): Promise<string[]>;
}

const single = (id: string, body: Body, ...validators: ((response: Body) => string[])[]): Check => ({
  id,
  run: async (client, model) => {
    const { response, errors } = await client.create({ model, ...body });
    return errors.length > 0 ? errors : validators.flatMap((v) => v(response));
  },
});

const userSays = (content: unknown) => [{ type: "message", role: "user", content }];

export const CHECKS: Check[] = [
  single("basic-response", { input: userSays("Greet me in three words.") }, hasOutput, completed),
  single("streaming-response", { input: userSays("Count to five."), stream: true }, completed),
  single(
    "system-prompt",
    {
      input: [
        { type: "message", role: "system", content: "Answer like a sailor." },
        ...userSays("Greet me."),
      ],
    },
    hasOutput,
    completed,
  ),
  single(
    "tool-calling",
    { input: userSays("What is the weather in Lyon?"), tools: [WEATHER] },
    hasOutput,
    hasItem("function_call"),
  ),
  {
    id: "tool-calling-streaming",
    run: async (client, model) => {
      const body = { model, input: userSays("What is the weather in Lyon?"), tools: [WEATHER], stream: true };
      const { events, errors } = await client.create(body);
      const types = events.map((e) => e.type);
      const call = (e: Event) => (e.item as Body | undefined)?.type === "function_call";
      if (!events.some((e) => e.type === "response.output_item.added" && call(e)))
        errors.push("no output_item.added of a function_call");
      for (const type of ["response.function_call_arguments.delta", "response.function_call_arguments.done"])
        if (!types.includes(type)) errors.push(`no ${type}`);
      if (!events.some((e) => e.type === "response.output_item.done" && call(e)))
        errors.push("no output_item.done of a function_call");
      return errors;
    },
  },
  {
    id: "function-call-roundtrip",
    run: async (client, model) => {
      const first = await client.create({
        model,
        input: "Look up the weather in Lyon with the tool.",
        tools: [WEATHER],
        tool_choice: { type: "function", name: "get_weather" },
      });
      if (first.errors.length > 0) return first.errors;
      const call = outputs(first.response).find((item) => item.type === "function_call");
      if (!call) return ["the first response has no function_call"];
      const second = await client.create({
        model,
        previous_response_id: first.response.id,
        input: [{ type: "function_call_output", call_id: call.call_id, output: "18 degrees, clear" }],
      });
      return second.errors.length > 0
        ? second.errors
        : [...hasOutput(second.response), ...completed(second.response)];
    },
  },
  single(
    "image-input",
    {
      input: userSays([
        { type: "input_text", text: "What is in this image?" },
        { type: "input_image", image_url: PIXEL },
      ]),
    },
    hasOutput,
    completed,
  ),
  single(
    "file-input",
    {
      input: userSays([
        { type: "input_text", text: "What is the title of this file?" },
        { type: "input_file", filename: "notes.txt", file_data: "data:text/plain;base64,VGl0bGU6IE5vdGVz" },
      ]),
    },
    hasOutput,
    completed,
  ),
  single(
    "multi-turn",
    {
      input: [
        ...userSays("My name is Ada."),
        { type: "message", role: "assistant", content: "Hello Ada." },
        ...userSays("What is my name?"),
      ],
    },
    hasOutput,
    completed,
  ),
  {
    id: "previous-response-id",
    run: async (client, model) => {
      const first = await client.create({ model, input: "Remember the word papaya. Reply OK." });
      if (first.errors.length > 0) return first.errors;
      const second = await client.create({
        model,
        previous_response_id: first.response.id,
        input: "Which word did I ask you to remember?",
      });
      return second.errors.length > 0
        ? second.errors
        : [...hasOutput(second.response), ...completed(second.response)];
    },
  },
  single(
    "streaming-agent-tools",
    { input: userSays("Use the calculator for 6 * 7."), stream: true },
    completed,
  ),
  {
    id: "compact",
    run: async (client, model) => {
      const res = await fetch(`${client.base}/responses/compact`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model,
          input: [...userSays("Plan a trip."), { type: "message", role: "assistant", content: "Where to?" }],
        }),
      });
      if (!res.ok) return [`HTTP ${res.status}: ${await res.text()}`];
      const body = (await res.json()) as Body;
      const compaction = z.object({
        id: z.string(),
        object: z.literal("response.compaction"),
        created_at: int,
        output: z.array(z.object({ type: z.string() }).loose()),
        usage,
      });
      const errors = problems(compaction, body, "");
      const items = outputs(body);
      if (items.at(-1)?.type !== "compaction") errors.push("the output does not end with a compaction item");
      if (errors.length > 0) return errors;
      // The compacted conversation goes back in as input.
      const next = await client.create({ model, input: [...items, ...userSays("Go on.")] });
      return next.errors.length > 0 ? next.errors : completed(next.response);
    },
  },
];

export function clientFor(base: string): Client {
  return new Client(base);
}
