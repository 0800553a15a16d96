// The Vercel AI SDK 4 (generateText under experimental_telemetry), scripted with MockLanguageModelV1
// from ai/test: the agent loop is generateText's own (maxSteps). See framework.py for what each
// scenario is and what its plan must be.

import { ROOT_CONTEXT, context } from "@opentelemetry/api";
import { experimental_createMCPClient, generateText, tool } from "ai";
import { MockLanguageModelV1 } from "ai/test";

import {
  CHARGE,
  DESCRIPTIONS,
  PAYMENT,
  PLAIN_TOOLS,
  REFUND,
  CannotProduce,
  billingMcpTransport,
  charge_card,
  create_invoice,
  main,
  readCall,
  send_payment_slow,
  session,
  writeCall,
} from "./runner_common.mjs";
import { SCHEMAS } from "./matrix_schemas.mjs";

const TELEMETRY = { isEnabled: true, recordInputs: true, recordOutputs: true, functionId: "billing" };
const MAX_STEPS = 5;

function aiTool(name, execute = PLAIN_TOOLS[name]) {
  const spec = { description: DESCRIPTIONS[name], parameters: SCHEMAS[name] };
  return tool(execute === null ? spec : { ...spec, execute }); // null: no execute (the call goes back to the caller)
}

/** A scripted model: each turn is a list of [callId, toolName, args] calls, or a final text. */
function scripted(turns) {
  let at = 0;
  const usage = { promptTokens: 10, completionTokens: 5 };
  const rawCall = { rawPrompt: null, rawSettings: {} };
  return new MockLanguageModelV1({
    doGenerate: async () => {
      const turn = at < turns.length ? turns[at] : "done";
      at += 1;
      if (typeof turn === "string") {
        return { rawCall, finishReason: "stop", usage, text: turn };
      }
      const toolCalls = turn.map(([toolCallId, toolName, args]) => ({ toolCallType: "function", toolCallId, toolName, args: JSON.stringify(args) }));
      return { rawCall, finishReason: "tool-calls", usage, toolCalls };
    },
  });
}

async function run(scenario) {
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
    tools.charge_card = aiTool("charge_card", charge_card); // AI SDK 4: the error ends generateText (ToolExecutionError)
    turns = [[["call_c1", "charge_card", CHARGE]], "done"];
  } else if (scenario === "write_times_out") {
    // no tool timeout in the SDK: generateText's abortSignal (AbortSignal.timeout) reaches the tool's execute
    tools.send_payment = aiTool("send_payment", (args, { abortSignal }) => send_payment_slow(args, abortSignal));
    turns = [[["call_p1", "send_payment", PAYMENT]], "done"];
    options = { abortSignal: AbortSignal.timeout(200) };
  } else if (scenario === "tool_error_to_model") {
    throw new CannotProduce("AI SDK 4 hands no tool error to the model: a thrown error ends generateText (ToolExecutionError), which write_raises is");
  } else if (scenario === "parallel_one_fails") {
    turns = [[readCall(), ["call_f1", "refund_order", REFUND]], "done"];
  } else if (scenario === "framework_retries") {
    throw new CannotProduce("no tool retry in AI SDK 4 (maxRetries retries model calls) and a tool's error ends generateText, so the model never asks again");
  } else if (scenario === "requested_never_ran" || scenario === "approval_interrupt_resume") {
    // a tool without execute: generateText stops and hands the call to the application (human in the loop)
    tools.create_invoice = aiTool("create_invoice", null);
    turns = [[writeCall()], "done"];
  } else if (scenario === "mcp_is_error") {
    const client = await experimental_createMCPClient({ transport: billingMcpTransport() });
    try {
      const mcpTools = await client.tools();
      const model = scripted([[["call_m1", "charge_card", { customer: "a", amount_cents: 1200 }]], "done"]);
      await session(() => generateText({ model, tools: mcpTools, prompt: "bill customer a", maxSteps: MAX_STEPS, experimental_telemetry: TELEMETRY }));
    } finally {
      await client.close();
    }
    return;
  } else {
    throw new CannotProduce(scenario);
  }
  const model = scripted(turns);
  await session(async () => {
    const first = await generateText({ model, tools, prompt: "bill customer a", maxSteps: MAX_STEPS, experimental_telemetry: TELEMETRY, ...options });
    if (scenario !== "approval_interrupt_resume") return;
    // approved: the application runs the call itself (the SDK 4 human-in-the-loop pattern) and resumes with its result
    // (its own code, under no span the SDK makes: context.with(ROOT_CONTEXT) keeps the tool's declare off the session span)
    const results = [];
    for (const call of first.toolCalls) {
      const result = await context.with(ROOT_CONTEXT, () => create_invoice(call.args));
      results.push({ type: "tool-result", toolCallId: call.toolCallId, toolName: call.toolName, result });
    }
    const messages = [{ role: "user", content: "bill customer a" }, ...first.response.messages, { role: "tool", content: results }];
    await generateText({ model, tools, messages, maxSteps: MAX_STEPS, experimental_telemetry: TELEMETRY });
  });
}

await main(run);
