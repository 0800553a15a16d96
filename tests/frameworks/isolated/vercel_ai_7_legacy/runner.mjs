// The Vercel AI SDK 7 (a ToolLoopAgent) under @ai-sdk/otel's LegacyOpenTelemetry integration (AI SDK 4-6's
// ai.generateText / ai.toolCall spans, for users who keep them), scripted with MockLanguageModelV4 from ai/test; the
// scenarios are ../vercel_ai_common.mjs's and everything but the integration is ../vercel_ai_7's runner.

import { experimental_createMCPClient } from "@ai-sdk/mcp";
import { Experimental_StdioMCPTransport } from "@ai-sdk/mcp/mcp-stdio";
import { LegacyOpenTelemetry } from "@ai-sdk/otel";
import * as ai from "ai";
import { MockLanguageModelV4 } from "ai/test";

import { main } from "./runner_common.mjs";
import { vercelAgentRunner } from "./vercel_ai_common.mjs";

ai.registerTelemetry(new LegacyOpenTelemetry());

const run = vercelAgentRunner({
  ai,
  MockModel: MockLanguageModelV4,
  telemetry: { telemetry: { functionId: "billing" } },
  mcpClient: (transport) => experimental_createMCPClient({ transport, protocolVersionDiscovery: false }), // see ../vercel_ai_7/framework.py
  StdioTransport: Experimental_StdioMCPTransport,
  toolTimeout: true,
});

await main(run);
