// A first agent: a model, the built-in tools, and the three questions of `agentloop demo`, with
// the run's events as they come. With OPENAI_API_KEY set it asks gpt-4o-mini; without, the demo's
// scripted model answers (no key, no network), calling the same real tools.
//
//   node examples/first-agent.ts              in this checkout, after npm install (Node.js 22.18+;
//                                             22.6 to 22.17: node --experimental-strip-types ...)
//   copy it into a project that ran npm install agentloop-runtime, and run it there the same way
//                                             (an ES module project: "type": "module"; README, Install)
import { Agent, calculator, convertTemperature, getCurrentTime } from "agentloop-runtime";
import { openAIChatModel } from "agentloop-runtime/openai";
import { DEMO_QUESTIONS, demoModel } from "agentloop-runtime/testing";

const model = process.env.OPENAI_API_KEY ? openAIChatModel({ model: "gpt-4o-mini" }) : demoModel();
const agent = new Agent({ model, tools: [calculator, getCurrentTime, convertTemperature] });

for (const question of DEMO_QUESTIONS) {
  console.log(`> ${question}`);
  const run = agent.stream(question);
  for await (const event of run) {
    if (event.type === "tool_call") console.log(`  ${event.name} ${JSON.stringify(event.arguments)}`);
    if (event.type === "tool_result") console.log(`  = ${event.content}`);
  }
  const { text, stopReason } = await run.result;
  console.log(`${text} (${stopReason})\n`);
}
