// The Vercel AI SDK 5 (generateText under experimental_telemetry), scripted with MockLanguageModelV2
// from ai/test: the agent loop is generateText's own (stopWhen: stepCountIs(n)). See framework.py for
// what each scenario is and what its plan must be.

import { experimental_createMCPClient } from "@ai-sdk/mcp";
import { ROOT_CONTEXT, context } from "@opentelemetry/api";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV2 } from "ai/test";

import {
  CHARGE,
  DESCRIPTIONS,
  PAYMENT,
  PLAIN_TOOLS,
  REFUND,
  STATE,
  CannotProduce,
  charge_card,
  create_invoice,
  billingMcpTransport,
  main,
  readCall,
  send_payment_slow,
  session,
  writeCall,
} from "./runner_common.mjs";
import { SCHEMAS } from "./matrix_schemas.mjs";
import { consume, streamingModel } from "./vercel_ai_common.mjs";

const TELEMETRY = { isEnabled: true, recordInputs: true, recordOutputs: true, functionId: "billing" };

function aiTool(name, execute = PLAIN_TOOLS[name]) {
  const spec = { description: DESCRIPTIONS[name], inputSchema: SCHEMAS[name] };
  return tool(execute === null ? spec : { ...spec, execute }); // null: no execute (the call goes back to the caller)
}

/** A scripted model: each turn is a list of [callId, toolName, args] calls, or a final text. */
function scripted(turns) {
  let at = 0;
  const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };
  return new MockLanguageModelV2({
    doGenerate: async () => {
      const turn = at < turns.length ? turns[at] : "done";
      at += 1;
      if (typeof turn === "string") {
        return { content: [{ type: "text", text: turn }], finishReason: "stop", usage, warnings: [] };
      }
      const content = turn.map(([toolCallId, toolName, args]) => ({ type: "tool-call", toolCallId, toolName, input: JSON.stringify(args) }));
      return { content, finishReason: "tool-calls", usage, warnings: [] };
    },
  });
}

/** The matrix's scenarios streamed (streamText, its fullStream consumed), with no enclosing span: as users run it. */
async function streamed(scenario) {
  const tools = { lookup_customer: aiTool("lookup_customer"), create_invoice: aiTool("create_invoice"), refund_order: aiTool("refund_order"), charge_card: aiTool("charge_card", charge_card) };
  const turns = {
    stream_write_commits: [[writeCall()], "done"],
    stream_write_raises: [[["call_c1", "charge_card", CHARGE]], "done"],
    stream_parallel_one_fails: [[readCall(), ["call_f1", "refund_order", REFUND]], "done"],
    stream_requested_never_ran: [[writeCall()], "done"],
    stream_abandoned_after_request: [[writeCall()], "done"],
  }[scenario];
  if (!turns) throw new CannotProduce(scenario);
  if (scenario === "stream_requested_never_ran") tools.create_invoice = aiTool("create_invoice", null); // handed to the application
  const model = streamingModel(MockLanguageModelV2, turns, false);
  const result = streamText({ model, tools, prompt: "bill customer a", stopWhen: stepCountIs(5), experimental_telemetry: TELEMETRY });
  await consume(result, scenario === "stream_abandoned_after_request");
  await new Promise((resolve) => setTimeout(resolve, 200)); // what an abandoned stream still runs, and its spans' ends
}

async function run(scenario) {
  if (scenario.startsWith("stream_")) return streamed(scenario);
  const tools = {
    lookup_customer: aiTool("lookup_customer"),
    create_invoice: aiTool("create_invoice"),
    refund_order: aiTool("refund_order"),
  };
  let turns = ["done"];
  let options = {};
  if (scenario === "read_ok") {
    turns = [[readCall()], "done"];
  } else if (scenario === "write_commits") {
    turns = [[writeCall()], "done"];
  } else if (scenario === "write_raises") {
    // AI SDK 5 lets no tool error out of generateText: the error becomes a tool-error part handed to the model
    tools.charge_card = aiTool("charge_card", charge_card);
    turns = [[["call_c1", "charge_card", CHARGE]], "done"];
  } else if (scenario === "write_times_out") {
    // no tool timeout in the SDK: generateText's abortSignal (AbortSignal.timeout) reaches the tool's execute
    tools.send_payment = aiTool("send_payment", (args, { abortSignal }) => send_payment_slow(args, abortSignal));
    turns = [[["call_p1", "send_payment", PAYMENT]], "done"];
    options = { abortSignal: AbortSignal.timeout(200) };
  } else if (scenario === "tool_error_to_model") {
    throw new CannotProduce("AI SDK 5 has one failure path: a thrown error becomes a tool-error part handed to the model, which write_raises is");
  } else if (scenario === "parallel_one_fails") {
    turns = [[readCall(), ["call_f1", "refund_order", REFUND]], "done"];
  } else if (scenario === "framework_retries") {
    STATE.flaky = true; // maxRetries retries the model call, never a tool: the model asks again
    turns = [[writeCall("call_w1")], [writeCall("call_w2")], "done"];
  } else if (scenario === "requested_never_ran" || scenario === "approval_interrupt_resume") {
    // a tool without execute: generateText stops and hands the call to the application (human in the loop)
    tools.create_invoice = aiTool("create_invoice", null);
    turns = [[writeCall()], "done"];
  } else if (scenario === "mcp_is_error") {
    const client = await experimental_createMCPClient({ transport: billingMcpTransport() });
    try {
      const mcpTools = await client.tools();
      const model = scripted([[["call_m1", "charge_card", { customer: "a", amount_cents: 1200 }]], "done"]);
      await session(() => generateText({ model, tools: mcpTools, prompt: "bill customer a", stopWhen: stepCountIs(5), experimental_telemetry: TELEMETRY }));
    } finally {
      await client.close();
    }
    return;
  } else {
    throw new CannotProduce(scenario);
  }
  const model = scripted(turns);
  await session(async () => {
    const first = await generateText({ model, tools, prompt: "bill customer a", stopWhen: stepCountIs(5), experimental_telemetry: TELEMETRY, ...options });
    if (scenario !== "approval_interrupt_resume") return;
    // approved: the application runs the call itself (the SDK 5 human-in-the-loop pattern) and resumes with its result
    const results = [];
    // (its own code, under no span the SDK makes: context.with(ROOT_CONTEXT) keeps the tool's declare off the session span)
    for (const call of first.toolCalls) {
      const output = await context.with(ROOT_CONTEXT, () => create_invoice(call.input));
      results.push({ type: "tool-result", toolCallId: call.toolCallId, toolName: call.toolName, output: { type: "text", value: output } });
    }
    const messages = [{ role: "user", content: "bill customer a" }, ...first.response.messages, { role: "tool", content: results }];
    await generateText({ model, tools, messages, stopWhen: stepCountIs(5), experimental_telemetry: TELEMETRY });
  });
}

await main(run);
