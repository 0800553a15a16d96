// The Vercel AI SDK 7 (a ToolLoopAgent) under @ai-sdk/otel's OpenTelemetry integration (registerTelemetry: GenAI
// semantic-convention spans), scripted with MockLanguageModelV4 from ai/test; the scenarios are
// ../vercel_ai_common.mjs's. See framework.py for what each scenario is and what its plan must be.
//
// AI SDK 7 moved OpenTelemetry out of `ai`: with no integration registered the SDK makes no span at all.
// `new OpenTelemetry()` is what the SDK's docs register (../vercel_ai_7_legacy registers LegacyOpenTelemetry).

import { experimental_createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";
import { OpenTelemetry } from "@ai-sdk/otel";
import * as ai from "ai";
import { MockLanguageModelV4 } from "ai/test";

import { main } from "./runner_common.mjs";
import { vercelAgentRunner } from "./vercel_ai_common.mjs";

ai.registerTelemetry(new OpenTelemetry());

const run = vercelAgentRunner({
  ai,
  MockModel: MockLanguageModelV4,
  telemetry: { telemetry: { functionId: "billing" } }, // the defaults: enabled once registered, inputs and outputs recorded
  // protocolVersionDiscovery false: the client's server/discover (2026-07-28) does not accept mcp 2.1.1's answer, and
  // its fallback, initialize, is refused on a connection the server then serves as 2026-07-28 (see framework.py)
  mcpClient: (transport) => experimental_createMCPClient({ transport, protocolVersionDiscovery: false }),
  StdioTransport: Experimental_StdioMCPTransport,
  toolTimeout: true, // timeout: { toolMs } (new in 7)
});

await main(run);
