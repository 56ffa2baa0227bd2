#!/usr/bin/env node
// pwf's host entry for the original @osolmaz/pi-workflows client.
//
// When no host answers on its socket, that client starts its host entry with
// node, as `node <entry> --database <db>`, and waits for the socket (HOST.md
// §1.19).  Pointed at this file, it gets `pwf serve --database <db>`: this
// entry runs `pwf serve` with the arguments it was given, passes SIGINT,
// SIGTERM and SIGHUP on to it, and exits as it exits.  `pwf serve
// --print-entry` prints where this file is (docs/serving-original-client.md).
//
// Which pwf: $PWF_BIN when set; else the `bin/pwf` of the installation this
// file belongs to (a wheel puts it in <prefix>/lib/pythonX.Y/site-packages/pwf/
// and the command in <prefix>/bin/pwf); else the first `pwf` on $PATH.
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const PREFIX_LEVELS = 4; // pwf/ -> site-packages/ -> pythonX.Y/ -> lib/ -> <prefix>
const FORWARDED = ["SIGINT", "SIGTERM", "SIGHUP"];

function runnable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function findPwf() {
  const given = process.env.PWF_BIN;
  if (given) return given;
  let directory = __dirname;
  for (let level = 0; level < PREFIX_LEVELS; level += 1) {
    directory = path.dirname(directory);
    const candidate = path.join(directory, "bin", "pwf");
    if (runnable(candidate)) return candidate;
  }
  for (const entry of (process.env.PATH || "").split(path.delimiter)) {
    if (entry === "") continue;
    const candidate = path.join(entry, "pwf");
    if (runnable(candidate)) return candidate;
  }
  return null;
}

function main() {
  const pwf = findPwf();
  if (pwf === null) {
    process.stderr.write(
      "[pwf host entry] cannot find pwf: set PWF_BIN to the pwf command, or put it on PATH\n",
    );
    process.exitCode = 1;
    return;
  }
  const child = spawn(pwf, ["serve", ...process.argv.slice(2)], { stdio: "inherit" });
  const forward = (signal) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  for (const signal of FORWARDED) process.on(signal, forward);
  child.on("error", (error) => {
    process.stderr.write(`[pwf host entry] cannot run ${pwf}: ${error.message}\n`);
    process.exitCode = 1;
  });
  child.on("exit", (code, signal) => {
    for (const name of FORWARDED) process.off(name, forward);
    if (signal !== null) {
      process.kill(process.pid, signal);
      return;
    }
    process.exitCode = code;
  });
}

main();
