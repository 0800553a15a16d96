// The matrix's scenarios for the Vercel AI SDK 6 and 7 (tests/frameworks/isolated/vercel_ai_6, vercel_ai_7): the
// same agent (a ToolLoopAgent, stopWhen: stepCountIs(5)), tools (tool() with zod schemas, needsApproval,
// toModelOutput), scripted model (the LanguageModelV3 / V4 result shape, which is one) and MCP client; each row's
// runner.mjs passes what its major version differs in (its mock model class, how telemetry is turned on, its MCP
// client, whether it has a tool timeout). AI SDK 4 and 5 keep their own runners (no agent class, no approval).
//
// Copied next to the runner in the framework's environment (envs.run), as every shared .mjs module is.


import {
  CHARGE,
  DESCRIPTIONS,
  PAYMENT,
  PLAIN_TOOLS,
  REFUND,
  STATE,
  CannotProduce,
  charge_card,
  readCall,
  refund_order,
  send_payment_slow,
  session,
  writeCall,
} from "./runner_common.mjs";
import { SCHEMAS } from "./matrix_schemas.mjs";


/** A scripted model (`MockModel`: ai/test's MockLanguageModelV3 or V4): each turn is a list of [callId, toolName,
 * args] calls, or a final text. */
function scripted(MockModel, turns) {
  let at = 0;
  const usage = {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 5, text: 5, reasoning: undefined },
  };
  return new MockModel({
    doGenerate: async () => {
      const turn = at < turns.length ? turns[at] : "done";
      at += 1;
      if (typeof turn === "string") {
        return { content: [{ type: "text", text: turn }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      }
      const content = turn.map(([toolCallId, toolName, args]) => ({ type: "tool-call", toolCallId, toolName, input: JSON.stringify(args) }));
      return { content, finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] };
    },
  });
}

/** A scripted model that streams (`doStream`): each turn one stream of the provider's parts, a `tool-call` part per
 * call (the whole input at once, as a provider's finished call) or the text, then `finish`. `v3`: the LanguageModelV3
 * finish reason and usage shapes (AI SDK 6, 7), else V2's (AI SDK 5). */
export function streamingModel(MockModel, turns, v3 = true) {
  let at = 0;
  const usage = v3
    ? { inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 5, text: 5, reasoning: undefined } }
    : { inputTokens: 10, outputTokens: 5, totalTokens: 15 };
  const finish = (reason, raw) => ({ type: "finish", finishReason: v3 ? { unified: reason, raw } : reason, usage });
  return new MockModel({
    doStream: async () => {
      const turn = at < turns.length ? turns[at] : "done";
      at += 1;
      const parts = [{ type: "stream-start", warnings: [] }];
      if (typeof turn === "string") {
        parts.push({ type: "text-start", id: "t1" }, { type: "text-delta", id: "t1", delta: turn }, { type: "text-end", id: "t1" }, finish("stop", "stop"));
      } else {
        parts.push(...turn.map(([toolCallId, toolName, args]) => ({ type: "tool-call", toolCallId, toolName, input: JSON.stringify(args) })), finish("tool-calls", "tool_calls"));
      }
      return { stream: new ReadableStream({ start(controller) { parts.forEach((part) => controller.enqueue(part)); controller.close(); } }) };
    },
  });
}

/** Consume a streamed run's `fullStream` to its end, or (`abandon`) stop reading once the model's tool call streamed
 * (the consumer, a chat UI whose user left, cancels the stream). */
export async function consume(result, abandon = false) {
  for await (const part of result.fullStream) {
    if (abandon && part.type === "tool-call") break;
  }
}

/** The tool catches its failure and hands it to the model itself: it returns { error }, which toModelOutput turns
 * into an error-text part (the model sees an error; the SDK records the raw output as the result). */
async function refundHandingErrorToModel(args) {
  try {
    return { refund: await refund_order(args) };
  } catch (error) {
    return { error: error.message };
  }
}

function refundModelOutput({ output }) {
  return output.error ? { type: "error-text", value: output.error } : { type: "json", value: output };
}

/** The billing MCP server (tests/frameworks/isolated/mcp_billing_server.py, FastMCP over stdio), started by the
 * SDK's own stdio transport with the interpreter the test names (envs.run: TRACEFENCE_MCP_PYTHON, its mcp 2.x). */
function billingServerParameters() {
  const python = process.env.TRACEFENCE_MCP_PYTHON;
  const script = process.env.TRACEFENCE_MCP_SERVER;
  if (!python || !script) throw new CannotProduce("no Python MCP server named (TRACEFENCE_MCP_PYTHON / TRACEFENCE_MCP_SERVER)");
  return { command: python, args: [script], env: { ...process.env } };
}

/**
 * The scenario runner for one AI SDK major version, for runner_common.mjs's `main`.
 *
 * @param sdk.ai the `ai` module (ToolLoopAgent, stepCountIs, tool)
 * @param sdk.MockModel ai/test's mock language model class of that version
 * @param sdk.telemetry the agent's telemetry settings (`{ telemetry }` or `{ experimental_telemetry }`)
 * @param sdk.mcpClient `async (transport) => client`: the version's MCP client over `transport`
 * @param sdk.StdioTransport the MCP client's stdio transport class
 * @param sdk.toolTimeout whether the agent has its own tool timeout (`timeout: { toolMs }`, AI SDK 7); else
 *   write_times_out aborts the run's abortSignal (AbortSignal.timeout), which reaches the tool's execute
 * @returns `async (scenario) => void`
 */
export function vercelAgentRunner({ ai, MockModel, telemetry, mcpClient, StdioTransport, toolTimeout }) {
  const { ToolLoopAgent, stepCountIs, tool } = ai;
  const aiTool = (name, execute = PLAIN_TOOLS[name], extra = {}) => tool({ description: DESCRIPTIONS[name], inputSchema: SCHEMAS[name], execute, ...extra });
  const agent = (turns, tools) => new ToolLoopAgent({ model: scripted(MockModel, turns), tools, stopWhen: stepCountIs(5), ...telemetry });

  async function mcpIsError() {
    const client = await mcpClient(new StdioTransport(billingServerParameters()));
    try {
      const { charge_card: charge } = await client.tools();
      const billing = agent([[["call_m1", "charge_card", { customer: "a", amount_cents: 1200 }]], "done"], { charge_card: charge });
      await session(() => billing.generate({ prompt: "bill customer a" }));
    } finally {
      await client.close();
    }
  }

  /** The matrix's scenarios streamed (`agent.stream`, its fullStream consumed), with no enclosing span: as users run it. */
  async function streamed(scenario) {
    const tools = { lookup_customer: aiTool("lookup_customer"), create_invoice: aiTool("create_invoice"), refund_order: aiTool("refund_order") };
    const turns = {
      stream_write_commits: [[writeCall()], "done"],
      stream_write_raises: [[["call_c1", "charge_card", CHARGE]], "done"],
      stream_tool_error_to_model: [[["call_f1", "refund_order", REFUND]], "done"],
      stream_parallel_one_fails: [[readCall(), ["call_f1", "refund_order", REFUND]], "done"],
      stream_requested_never_ran: [[writeCall()], "done"],
      stream_abandoned_after_request: [[writeCall()], "done"],
    }[scenario];
    if (!turns) throw new CannotProduce(scenario);
    tools.charge_card = aiTool("charge_card", charge_card);
    if (scenario === "stream_tool_error_to_model") tools.refund_order = aiTool("refund_order", refundHandingErrorToModel, { toModelOutput: refundModelOutput });
    if (scenario === "stream_requested_never_ran") tools.create_invoice = aiTool("create_invoice", PLAIN_TOOLS.create_invoice, { needsApproval: true });
    const billing = new ToolLoopAgent({ model: streamingModel(MockModel, turns), tools, stopWhen: stepCountIs(5), ...telemetry });
    await consume(await billing.stream({ prompt: "bill customer a" }), scenario === "stream_abandoned_after_request");
    await new Promise((resolve) => setTimeout(resolve, 200)); // what an abandoned stream still runs, and its spans' ends
  }

  return async function run(scenario) {
    if (scenario.startsWith("stream_")) return streamed(scenario);
    if (scenario === "mcp_is_error") return mcpIsError();
    const tools = {
      lookup_customer: aiTool("lookup_customer"),
      create_invoice: aiTool("create_invoice"),
      refund_order: aiTool("refund_order"),
    };
    let turns = ["done"];
    let call = {};
    if (scenario === "read_ok") {
      turns = [[readCall()], "done"];
    } else if (scenario === "write_commits") {
      turns = [[writeCall()], "done"];
    } else if (scenario === "write_raises") {
      // no tool error leaves the agent: the thrown error becomes a tool-error part handed to the model
      tools.charge_card = aiTool("charge_card", charge_card);
      turns = [[["call_c1", "charge_card", CHARGE]], "done"];
    } else if (scenario === "write_times_out") {
      tools.send_payment = aiTool("send_payment", (args, { abortSignal }) => send_payment_slow(args, abortSignal));
      turns = [[["call_p1", "send_payment", PAYMENT]], "done"];
      call = toolTimeout ? { timeout: { toolMs: 200 } } : { abortSignal: AbortSignal.timeout(200) };
    } else if (scenario === "tool_error_to_model") {
      tools.refund_order = aiTool("refund_order", refundHandingErrorToModel, { toModelOutput: refundModelOutput });
      turns = [[["call_f1", "refund_order", REFUND]], "done"];
    } else if (scenario === "parallel_one_fails") {
      turns = [[readCall(), ["call_f1", "refund_order", REFUND]], "done"];
    } else if (scenario === "framework_retries") {
      STATE.flaky = true; // maxRetries retries the model call, never a tool: the model asks again
      turns = [[writeCall("call_w1")], [writeCall("call_w2")], "done"];
    } else if (scenario === "requested_never_ran" || scenario === "approval_interrupt_resume") {
      // needsApproval: the agent stops with a tool-approval-request; the application answers it (or never does)
      tools.create_invoice = aiTool("create_invoice", PLAIN_TOOLS.create_invoice, { needsApproval: true });
      turns = [[writeCall()], "done"];
    } else {
      throw new CannotProduce(scenario);
    }
    const billing = agent(turns, tools);
    await session(async () => {
      const first = await billing.generate({ prompt: "bill customer a", ...call });
      if (scenario !== "approval_interrupt_resume") return;
      // approved: the application answers each tool-approval-request and runs the agent again on the messages
      const approvals = first.content.filter((part) => part.type === "tool-approval-request");
      if (approvals.length === 0) throw new Error("no tool-approval-request in the first run");
      const answers = approvals.map((part) => ({ type: "tool-approval-response", approvalId: part.approvalId, approved: true }));
      const messages = [{ role: "user", content: "bill customer a" }, ...first.response.messages, { role: "tool", content: answers }];
      await billing.generate({ messages });
    });
  };
}
