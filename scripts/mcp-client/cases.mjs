// cases.mjs: drives buddy's MCP server with the official TypeScript SDK
// client (@modelcontextprotocol/sdk, installed by scripts/install-mcp-client.sh
// into $MCP_SDK_DIR) and prints what it saw as one JSON object on stdout.
// cmd/buddy/e2e_mcp_test.go runs it and checks the result.
//
//   MCP_SDK_DIR=DIR MCP_FILES=DIR MCP_OUTSIDE=FILE node cases.mjs stdio BUDDY_BIN [ARGS...]
//   MCP_SDK_DIR=DIR MCP_FILES=DIR MCP_OUTSIDE=FILE node cases.mjs http URL TOKEN
//
// Cases: tools/list; read_file inside MCP_FILES and at MCP_OUTSIDE; write_file
// with the elicitation form accepted, then declined; spin (a loop that
// exhausts its fuel); write_file from a second client that declares no
// elicitation capability.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const sdkDir = process.env.MCP_SDK_DIR;
if (!sdkDir) {
  console.error("cases.mjs: set MCP_SDK_DIR (scripts/install-mcp-client.sh prints it)");
  process.exit(2);
}
const require = createRequire(join(sdkDir, "package.json"));
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ElicitRequestSchema } = require("@modelcontextprotocol/sdk/types.js");
const sdkVersion = JSON.parse(readFileSync(join(sdkDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"), "utf8")).version;

const [mode, target, ...rest] = process.argv.slice(2);
const files = process.env.MCP_FILES;
const outside = process.env.MCP_OUTSIDE;

function transport() {
  if (mode === "stdio") {
    return new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "inherit" });
  }
  if (mode === "http") {
    return new StreamableHTTPClientTransport(new URL(target), {
      requestInit: { headers: { Authorization: `Bearer ${rest[0]}` } },
    });
  }
  throw new Error(`mode ${mode}: want stdio or http`);
}

// The next answer the elicitation form gets, and the forms shown.
let answer = "decline";
const forms = [];

async function connect(elicit) {
  const client = new Client(
    { name: elicit ? "buddy-cases" : "buddy-cases-noelicit", version: "1.0.0" },
    { capabilities: elicit ? { elicitation: { form: {} } } : {} },
  );
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      forms.push(req.params.message);
      return answer === "accept" ? { action: "accept", content: {} } : { action: answer };
    });
  }
  await client.connect(transport());
  return client;
}

function text(res) {
  return (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function call(client, name, args) {
  try {
    const res = await client.callTool({ name, arguments: args });
    return { isError: !!res.isError, text: text(res), structured: res.structuredContent ?? null };
  } catch (e) {
    return { protocolError: String(e && e.message ? e.message : e) };
  }
}

const out = { sdk: sdkVersion, mode, cases: {} };
const client = await connect(true);
out.protocol = client.getServerVersion();
const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, annotations: t.annotations ?? null, inputSchema: t.inputSchema, description: t.description }));

out.cases.read_inside = await call(client, "read_file", { path: join(files, "hello.txt") });
out.cases.read_outside = await call(client, "read_file", { path: outside });
answer = "accept";
out.cases.write_accept = await call(client, "write_file", { path: join(files, "accepted.txt"), content: "accepted over MCP" });
answer = "decline";
out.cases.write_decline = await call(client, "write_file", { path: join(files, "declined.txt"), content: "never written" });
answer = "cancel";
out.cases.write_cancel = await call(client, "write_file", { path: join(files, "canceled.txt"), content: "never written" });
out.cases.spin = await call(client, "spin", {});
out.forms = forms;

const plain = await connect(false);
out.cases.write_noelicit = await call(plain, "write_file", { path: join(files, "noelicit.txt"), content: "never written" });

await plain.close();
await client.close();
console.log(JSON.stringify(out));
