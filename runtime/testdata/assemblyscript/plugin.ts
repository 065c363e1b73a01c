// as_plugin: a third-party Extism plugin written with the real AssemblyScript
// PDK (@extism/as-pdk 1.0.0, assemblyscript 0.28.20; see package.json), built
// by scripts/build-fixtures.sh into runtime/testdata/as_plugin.wasm. It uses
// nothing of buddy's: only the Extism kernel ABI through the PDK.
//
//   greet         {"name": "Ada"} (or the plain text Ada) -> Hello, Ada!
//                 a JSON object without a string "name" -> error
//                 "invalid_input: name is required"
//   count_vowels  {"text": "..."} (or plain text) -> {"count": N}, N the ASCII
//                 vowels (a e i o u, either case) of the text
import { Host, Memory } from "@extism/as-pdk";
import { error_set } from "@extism/as-pdk/lib/env";

// Replaces AssemblyScript's default `env.abort` import (Extism provides no
// `env` module): --use abort=plugin/myAbort.
function myAbort(message: string | null, fileName: string | null, line: u32, col: u32): void {
  unreachable();
}

export function greet(): i32 {
  const input = Host.inputString();
  let name = input;
  if (isObject(input)) {
    const v = stringField(input, "name");
    if (v === null) {
      return fail("invalid_input: name is required");
    }
    name = v;
  }
  output("Hello, " + name + "!");
  return 0;
}

export function count_vowels(): i32 {
  const input = Host.inputString();
  let text = input;
  if (isObject(input)) {
    const v = stringField(input, "text");
    if (v === null) {
      return fail("invalid_input: text is required");
    }
    text = v;
  }
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i) | 0x20; // ASCII lower case
    if (c == 0x61 || c == 0x65 || c == 0x69 || c == 0x6f || c == 0x75) {
      count++;
    }
  }
  output('{"count": ' + count.toString() + "}");
  return 0;
}

// output sets the plugin's output to s in UTF-8. (Host.outputString in
// as-pdk 1.0.0 passes the UTF-16 length, which cuts non-ASCII text short.)
function output(s: string): void {
  Host.output(Uint8Array.wrap(String.UTF8.encode(s)));
}

// fail reports msg to the host and returns the non-zero status of a failure.
function fail(msg: string): i32 {
  error_set(Memory.allocateString(msg).offset);
  return 1;
}

function isObject(s: string): bool {
  const i = skipSpace(s, 0);
  return i < s.length && s.charCodeAt(i) == 0x7b; // {
}

function skipSpace(s: string, i: i32): i32 {
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    i++;
  }
  return i;
}

// pos is the position after the last string parseString read.
let pos: i32 = 0;

// parseString reads the JSON string starting at s[i] == '"'; null if malformed.
function parseString(s: string, i: i32): string | null {
  if (i >= s.length || s.charCodeAt(i) != 0x22) return null;
  i++;
  let out = "";
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c == 0x22) {
      pos = i + 1;
      return out;
    }
    if (c != 0x5c) {
      out += String.fromCharCode(c);
      i++;
      continue;
    }
    if (i + 1 >= s.length) return null;
    const e = s.charCodeAt(i + 1);
    i += 2;
    if (e == 0x22 || e == 0x5c || e == 0x2f) out += String.fromCharCode(e);
    else if (e == 0x62) out += "\b";
    else if (e == 0x66) out += "\f";
    else if (e == 0x6e) out += "\n";
    else if (e == 0x72) out += "\r";
    else if (e == 0x74) out += "\t";
    else if (e == 0x75) {
      if (i + 4 > s.length) return null;
      const code = I32.parseInt(s.substring(i, i + 4), 16);
      out += String.fromCharCode(code);
      i += 4;
    } else return null;
  }
  return null;
}

// skipValue returns the position after the JSON value starting at s[i]
// (strings, and objects and arrays by nesting depth), or -1.
function skipValue(s: string, i: i32): i32 {
  let depth = 0;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c == 0x22) {
      if (parseString(s, i) === null) return -1;
      i = pos;
    } else {
      if (c == 0x7b || c == 0x5b) depth++;
      else if (c == 0x7d || c == 0x5d) {
        if (depth == 0) return i;
        depth--;
      } else if (c == 0x2c && depth == 0) return i;
      i++;
    }
    if (depth == 0 && c != 0x20) {
      const j = skipSpace(s, i);
      if (j >= s.length || s.charCodeAt(j) == 0x2c || s.charCodeAt(j) == 0x7d) return j;
    }
  }
  return -1;
}

// stringField is the string value of key in the top-level JSON object s, or
// null when it is absent, not a string, or s is malformed.
function stringField(s: string, key: string): string | null {
  let i = skipSpace(s, 0) + 1; // past '{'
  while (true) {
    i = skipSpace(s, i);
    const k = parseString(s, i);
    if (k === null) return null;
    i = skipSpace(s, pos);
    if (i >= s.length || s.charCodeAt(i) != 0x3a) return null; // :
    i = skipSpace(s, i + 1);
    if (k == key) {
      return parseString(s, i);
    }
    i = skipValue(s, i);
    if (i < 0 || i >= s.length || s.charCodeAt(i) != 0x2c) return null; // ,
    i++;
  }
}
