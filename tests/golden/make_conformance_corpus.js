// Regenerate tests/golden/conformance_corpus.jsonl from Node, never from pwf.
//
// Run by hand only, with node (18 or later) on PATH:
//
//   node tests/golden/make_conformance_corpus.js          # check the corpus
//   node tests/golden/make_conformance_corpus.js --write  # rewrite it
//
// Each line is one case; strings are written by JSON.stringify, so a lone
// surrogate is the escape \udxxx and the file is ASCII.  The cases pin what
// the original does with text holding lone surrogates and with blob media
// types (DOMAIN §3.1, §3.3, §4):
//
// * "text": the UTF-8 bytes Node writes for a string (a lone surrogate
//   becomes U+FFFD), their SHA-256, their byte length (the opaque-id rule
//   counts these), and the canonical JSON bytes of the string as a value;
// * "canonical": a value and its canonical bytes and SHA-256;
// * "sessionRequestId": `session-` + SHA-256 of `clientId NUL idempotencyKey`;
// * "fingerprint": the SHA-256 of a canonical request without its requestId;
// * "opaqueId": whether an id passes the protocol's 256-byte rule, counted
//   in the UTF-8 bytes Node writes (3 for a lone surrogate);
// * "blobs": a sequence of putJson / putText calls against one store, with
//   each call's media type, bytes and hash, or the error it throws.
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");

const CORPUS = path.join(__dirname, "conformance_corpus.jsonl");

function normalise(value) {
  if (Array.isArray(value)) return value.map(normalise);
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new Error("JSON numbers must be finite");
  }
  if (value !== null && typeof value === "object") {
    const copy = {};
    for (const key of Object.keys(value).sort()) {
      if (value[key] !== undefined) copy[key] = normalise(value[key]);
    }
    return copy;
  }
  return value;
}

const canonicalJson = (value) => JSON.stringify(normalise(value));
const sha256 = (data) => crypto.createHash("sha256").update(data).digest("hex");
const hex = (text) => Buffer.from(text, "utf8").toString("hex");

// A blob store as the original's putBlob: insert or ignore, then read back.
function blobStore() {
  const rows = new Map();
  function put(content, mediaType) {
    const hash = crypto.createHash("sha256").update(content).digest("hex");
    if (!rows.has(hash)) rows.set(hash, { mediaType, content });
    const stored = rows.get(hash);
    if (stored.mediaType !== mediaType || !stored.content.equals(content)) {
      throw new Error("Content-addressed blob conflict");
    }
    return { mediaType, hex: content.toString("hex"), sha256: hash };
  }
  return {
    putJson: (value) => put(Buffer.from(canonicalJson(value), "utf8"), "application/json"),
    putText: (value) => put(Buffer.from(value, "utf8"), "text/plain"),
    readJson(hash) {
      const stored = rows.get(hash);
      if (stored === undefined || stored.mediaType !== "application/json") {
        throw new Error("JSON blob is missing or has the wrong media type");
      }
      return JSON.parse(stored.content.toString("utf8"));
    },
  };
}

const TEXTS = [
  ["lone high surrogate", "\ud800"],
  ["lone low surrogate", "\udfff"],
  ["high surrogate inside text", "a\udbffb"],
  ["two lone highs", "\ud800\ud800"],
  ["reversed pair", "\ude00\ud83d"],
  ["a proper pair", "\ud83d\ude00"],
  ["emoji cut after its high half", "Release notes \ud83c"],
  ["replacement character itself", "\ufffd"],
  ["plain ASCII", "plain"],
];

const VALUES = [
  ["object with lone surrogates in keys and values", { "\udc00": "\ud800", a: ["x\udfffy"] }],
  ["prompt cut in an emoji", { prompt: "Summarise \ud83d" }],
  ["worker output", { output: { text: "\ude00 done" }, status: "completed" }],
];

const SESSION_IDS = [
  ["lone surrogate in the key", "cli-A", "fu-\ud800"],
  ["lone surrogate in the client", "cli-\udc00", "fu-1"],
  ["U+FFFD in the key", "cli-A", "fu-\ufffd"],
  ["plain", "cli-A", "fu-1"],
];

const REQUESTS = [
  [
    "run.start with lone surrogates",
    {
      schema: "pi-workflows.client.v1",
      type: "request",
      requestId: "r-\ud800",
      clientId: "cli-A",
      operation: "run.start",
      idempotencyKey: "k-\udbff",
      runId: "run-1",
      payload: { input: { text: "\ud83d" }, workflowName: "echo\udc00" },
    },
  ],
];

const OPAQUE_IDS = [
  ["85 lone surrogates are 255 bytes", "\ud800".repeat(85)],
  ["86 lone surrogates are 258 bytes", "\ud800".repeat(86)],
  ["253 letters and a lone surrogate are 256 bytes", "a".repeat(253) + "\udfff"],
  ["254 letters and a lone surrogate are 257 bytes", "a".repeat(254) + "\udfff"],
  ["64 emoji are 256 bytes", "\ud83d\ude00".repeat(64)],
  ["a lone surrogate alone", "\udc00"],
];

// As the 0.16 protocol's requireOpaqueId.
const opaqueIdOk = (value) =>
  typeof value === "string" && value.length > 0 && Buffer.byteLength(value) <= 256;

// Each sequence runs against a fresh store; every step is a put or a read.
const BLOB_SEQUENCES = [
  ["text first, then the same bytes as JSON", [["text", '{"n":1}'], ["json", { n: 1 }]]],
  ["JSON first, then the same bytes as text", [["json", { n: 1 }], ["text", '{"n":1}']]],
  ["a JSON string and its text differ in bytes", [["json", "hello"], ["text", "hello"]]],
  ["text that spells a JSON string", [["json", "hello"], ["text", '"hello"']]],
  ["the same text twice", [["text", "same"], ["text", "same"]]],
  ["the same JSON twice", [["json", [1, 2]], ["json", [1, 2]]]],
  ["JSON null and the text null", [["text", "null"], ["json", null]]],
  ["text with a lone surrogate is U+FFFD", [["text", "\ud800"], ["text", "\ufffd"]]],
  ["JSON with a lone surrogate keeps the escape", [["json", "\ud800"], ["text", '"\\ud800"']]],
  ["reading text as JSON", [["text", "[1]"], ["readJson", "[1]"]]],
  ["reading JSON as JSON", [["json", [1]], ["readJson", "[1]"]]],
];

function blobSequence(steps) {
  const store = blobStore();
  return steps.map(([kind, value]) => {
    try {
      if (kind === "json") return { put: "json", value, ...store.putJson(value) };
      if (kind === "text") return { put: "text", value, ...store.putText(value) };
      return { read: "json", hash: sha256(Buffer.from(value, "utf8")), value: store.readJson(sha256(Buffer.from(value, "utf8"))) };
    } catch (error) {
      return kind === "readJson"
        ? { read: "json", hash: sha256(Buffer.from(value, "utf8")), error: error.message }
        : { put: kind, value, error: error.message };
    }
  });
}

function build() {
  const lines = [];
  for (const [name, text] of TEXTS) {
    lines.push({
      kind: "text",
      name,
      text,
      utf8: hex(text),
      sha256: sha256(text),
      byteLength: Buffer.byteLength(text),
      canonical: hex(canonicalJson(text)),
    });
  }
  for (const [name, value] of VALUES) {
    const text = canonicalJson(value);
    lines.push({ kind: "canonical", name, value, canonical: hex(text), sha256: sha256(text) });
  }
  for (const [name, clientId, idempotencyKey] of SESSION_IDS) {
    const id = `session-${sha256(`${clientId}\0${idempotencyKey}`)}`;
    lines.push({ kind: "sessionRequestId", name, clientId, idempotencyKey, id });
  }
  for (const [name, request] of REQUESTS) {
    const { requestId, ...rest } = request;
    const line = canonicalJson(request);
    lines.push({
      kind: "fingerprint",
      name,
      line: hex(line),
      fingerprint: sha256(canonicalJson(rest)),
      requestId,
    });
  }
  for (const [name, id] of OPAQUE_IDS) {
    lines.push({ kind: "opaqueId", name, id, byteLength: Buffer.byteLength(id), valid: opaqueIdOk(id) });
  }
  for (const [name, steps] of BLOB_SEQUENCES) {
    lines.push({ kind: "blobs", name, steps: blobSequence(steps) });
  }
  // Escape every non-ASCII code unit so the file is ASCII, as the Python corpus is.
  const ascii = (line) =>
    JSON.stringify(line).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
  return lines.map((line) => ascii(line) + "\n").join("");
}

const text = build();
if (process.argv.includes("--write")) {
  fs.writeFileSync(CORPUS, text, "ascii");
  process.stdout.write(`wrote ${text.split("\n").length - 1} cases to ${CORPUS}\n`);
} else if (fs.existsSync(CORPUS) && fs.readFileSync(CORPUS, "ascii") === text) {
  process.stdout.write(`${path.basename(CORPUS)} matches Node\n`);
} else {
  process.stdout.write(`${path.basename(CORPUS)} differs from Node; rerun with --write\n`);
  process.exitCode = 1;
}
