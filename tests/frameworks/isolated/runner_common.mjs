// What every Node.js framework runner under tests/frameworks/isolated/<framework>/runner.mjs shares:
// the protocol of runner_common.py, in JavaScript.
//
// This module runs INSIDE the framework's own environment (a folder made by envs.py holding its
// package.json and node_modules; envs.run copies this file next to the runner): it needs only
// @opentelemetry/api, @opentelemetry/sdk-trace-base, @opentelemetry/context-async-hooks and
// @opentelemetry/otlp-transformer (every Node framework's package.json names all four). It holds the
// matrix's tools (the same names, arguments, results and failures as matrix_tools.py), labels tool
// spans as a producer in any language does (tracefence.effect / tracefence.idempotency_key on the
// active span, DESIGN.md), collects each scenario's spans in memory and writes them as one serialized
// OTLP ExportTraceServiceRequest (protobuf bytes: ProtobufTraceSerializer.serializeRequest).
//
// The runner protocol (`node runner.mjs OUT_DIR [SCENARIO ...]`): for each scenario, exactly one of
// OUT_DIR/<scenario>.otlp.pb (the spans), <scenario>.cannot (UTF-8: why the framework cannot make it)
// or <scenario>.error (UTF-8: the stack) is written.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

export const SCENARIO_KEYS = [
  "read_ok",
  "write_commits",
  "write_raises",
  "write_times_out",
  "tool_error_to_model",
  "parallel_one_fails",
  "framework_retries",
  "requested_never_ran",
  "approval_interrupt_resume",
  "mcp_is_error",
];

export const INVOICE = { customer: "a", amount_cents: 1200, idempotency_key: "inv-17" };
export const CHARGE = { customer: "a", amount_cents: 500 };
export const PAYMENT = { customer: "a", amount_cents: 700 };
export const REFUND = { order: "o-7", amount_cents: 300 };
export const CUSTOMER = { customer: "a" };
export const STATE = {}; // per scenario: how often each tool ran, and how the flaky ones behave

/** The framework (this version) cannot make this scenario; the message says why. */
export class CannotProduce extends Error {
  constructor(message) {
    super(message);
    this.name = "CannotProduce";
  }
}

// The Python tools' exception types, by name (a span's exception.type reads the same in both languages).
class NamedError extends Error {
  constructor(name, message) {
    super(message);
    this.name = name;
  }
}

export function ran(name) {
  STATE[name] = (STATE[name] || 0) + 1;
  return STATE[name];
}

/** Label the active span (or `span`) as a tool body would: tracefence.effect and
 * tracefence.idempotency_key (DESIGN.md, the producer's own labels). No recording span (a framework
 * running the tool outside its span): left alone, noted in STATE.unlabelled. */
export function declare(effect, idempotencyKey = undefined, span = undefined) {
  const target = span ?? trace.getActiveSpan();
  if (!target || !target.isRecording()) {
    (STATE.unlabelled ??= []).push(effect);
    return;
  }
  target.setAttribute("tracefence.effect", effect);
  if (idempotencyKey !== undefined && idempotencyKey !== null) {
    target.setAttribute("tracefence.idempotency_key", idempotencyKey);
  }
}

export const readCall = () => ["call_r1", "lookup_customer", CUSTOMER];
export const writeCall = (callId = "call_w1") => [callId, "create_invoice", INVOICE];

// -- The tools (plain async functions of one arguments object; each runner wraps them in its framework's tool type)

export const DESCRIPTIONS = {
  lookup_customer: "Look a customer up.",
  create_invoice: "Create an invoice; the first call fails when the run is set flaky.",
  charge_card: "Charge a card: the processor declines (raises).",
  send_payment: "Send a payment: the payment API does not answer (raises TimeoutError).",
  refund_order: "Refund an order: the refund API refuses (raises; the framework hands it to the model).",
};

export async function lookup_customer({ customer }) {
  declare("read");
  ran("lookup_customer");
  return `customer ${customer}: active`;
}

export async function create_invoice({ customer, amount_cents, idempotency_key }) {
  declare("write", idempotency_key);
  if (ran("create_invoice") === 1 && STATE.flaky) {
    throw new NamedError("ConnectionError", "billing API reset the connection");
  }
  return "invoice inv_8812";
}

export async function charge_card({ customer, amount_cents }) {
  declare("write");
  ran("charge_card");
  throw new NamedError("RuntimeError", "card declined");
}

export async function send_payment({ customer, amount_cents }) {
  declare("write");
  ran("send_payment");
  throw new NamedError("TimeoutError", "payment API did not answer in 10s");
}

/** The payment API answers after the framework's tool timeout (2 s); `signal` (an AbortSignal) ends the wait early. */
export async function send_payment_slow({ customer, amount_cents }, signal = undefined) {
  declare("write");
  ran("send_payment");
  try {
    await sleep(2000, undefined, signal ? { signal } : undefined);
  } catch (error) {
    throw signal?.reason ?? error; // AbortSignal.timeout's reason: a DOMException named TimeoutError
  }
  return "payment pay_1";
}

export async function refund_order({ order, amount_cents }) {
  declare("write");
  ran("refund_order");
  throw new NamedError("RuntimeError", "refund refused: order already refunded");
}

export const PLAIN_TOOLS = { lookup_customer, create_invoice, charge_card, send_payment, refund_order };

// -- An MCP server for the clients of the frameworks (mcp_is_error) ---------------------------------------------

/** A tiny MCP server in this process, behind an MCP client's transport interface (start / send / close and
 * the onmessage / onclose callbacks, JSON-RPC message objects in and out: the shape of the MCP TypeScript SDK's
 * Transport and of @ai-sdk/mcp's MCPTransport): one tool, charge_card, whose every call answers a
 * CallToolResult with isError true (the processor declines). Not traced: the server is another party. */
export function billingMcpTransport() {
  const transport = {
    async start() {},
    async close() {
      transport.onclose?.();
    },
    async send(message) {
      if (message.id === undefined) return; // notifications/initialized
      const answer = (result) => queueMicrotask(() => transport.onmessage?.({ jsonrpc: "2.0", id: message.id, result }));
      if (message.method === "initialize") {
        answer({ protocolVersion: message.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "billing", version: "1.0.0" } });
      } else if (message.method === "tools/list") {
        const inputSchema = { type: "object", properties: { customer: { type: "string" }, amount_cents: { type: "integer" } }, required: ["customer", "amount_cents"] };
        answer({ tools: [{ name: "charge_card", description: "Charge a card.", inputSchema }] });
      } else if (message.method === "tools/call") {
        ran("charge_card");
        answer({ content: [{ type: "text", text: "card declined" }], isError: true });
      } else {
        queueMicrotask(() => transport.onmessage?.({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "method not found" } }));
      }
    },
  };
  return transport;
}

/** Serve billingMcpTransport()'s server over this process's stdin / stdout (the MCP stdio transport: one
 * JSON-RPC message per line), for a framework whose MCP client starts a server process
 * (`node --input-type=module -e 'import("<this file's URL>").then((m) => m.serveMcpOverStdio())'`). Runs until stdin closes. */
export function serveMcpOverStdio() {
  const server = billingMcpTransport();
  server.onmessage = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
  let buffered = "";
  process.stdin.setEncoding("utf-8");
  process.stdin.on("data", (chunk) => {
    buffered += chunk;
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (line) server.send(JSON.parse(line));
    }
  });
  process.stdin.on("end", () => process.exit(0));
}

// -- Collection and the protocol ------------------------------------------------------------------------------

export const EXPORTER = new InMemorySpanExporter();
export const PROVIDER = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(EXPORTER)] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(PROVIDER); // frameworks that trace through the global provider use this one

/** A plain parent span around `fn` (an async function): two runs of one agent session (interrupted,
 * then resumed) make one trace. Returns what `fn` returns; its error ends the span and goes on. */
export async function session(fn, name = "billing session") {
  return PROVIDER.getTracer("conformance").startActiveSpan(name, async (span) => {
    try {
      return await fn();
    } finally {
      span.end();
    }
  });
}

/** Run `await run(scenario)` for each scenario named in argv (default: all), writing the protocol's files
 * to argv[0]. `run` throws CannotProduce for a scenario its framework cannot make; any other error it lets
 * out is the framework's (a raised write ends the run): the spans made so far are the scenario's. Exits
 * the process with code 0 once every file is written (a framework's stray timer does not keep it up). */
export async function main(run, argv = process.argv.slice(2)) {
  const out = argv[0];
  mkdirSync(out, { recursive: true });
  for (const scenario of argv.length > 1 ? argv.slice(1) : SCENARIO_KEYS) {
    for (const key of Object.keys(STATE)) delete STATE[key];
    EXPORTER.reset();
    try {
      await run(scenario);
    } catch (error) {
      if (error instanceof CannotProduce) {
        writeFileSync(join(out, `${scenario}.cannot`), error.message || scenario, "utf-8");
        continue;
      }
      STATE.raised = String(error?.stack ?? error); // the framework's own failure ends the run; its spans are the cell
      if (process.env.TRACEFENCE_RUNNER_DEBUG) process.stderr.write(`${scenario}: ${STATE.raised}\n`);
    }
    try {
      await PROVIDER.forceFlush();
      const bytes = ProtobufTraceSerializer.serializeRequest(EXPORTER.getFinishedSpans());
      writeFileSync(join(out, `${scenario}.otlp.pb`), bytes);
    } catch (error) {
      writeFileSync(join(out, `${scenario}.error`), String(error?.stack ?? error), "utf-8");
    }
  }
  process.exit(0);
}
