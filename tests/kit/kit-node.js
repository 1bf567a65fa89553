#!/usr/bin/env node
/* kit-node.js: runs the inference kit's engine (src/kit/dc-kit-engine.js)
 * under Node, for the tests and the benchmark.
 *
 *   node tests/kit/kit-node.js FILE.html|FILE.blob --prompt TEXT --tokens N
 *        --temperature T --seed S [--bench] [--info] [--engine FILE.js]
 *
 * Prints one JSON array of the generated token ids on stdout, the same ids
 * as `daisychain-cli generate --json` for the same checkpoint and settings
 * (the temperature is a float, like the CLI's). --info prints the model's
 * info object instead; --bench prints {"tokens", "seconds", "tokens_per_s",
 * "cpu_seconds", "tokens_per_cpu_s", "load_seconds"} (generation only);
 * --dump-logits FILE writes the logits after the prompt (256 float32,
 * little-endian) and prints nothing; --no-wasm uses the JavaScript products
 * instead of WebAssembly SIMD (the same integers); --check-incremental
 * generates, then replays the sequence one token at a time (the engine's
 * incremental path, model.forward) and compares every position's logits
 * with a fresh full pass, printing {"steps", "differing"}. On failure it
 * prints {"code", "message"} on stderr and exits with status 1 (code: the
 * engine's error code, e.g. hash-mismatch, bad-kit, rule-mismatch; usage
 * for bad arguments).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
'use strict';

const fs = require ('fs');
const path = require ('path');

/* A kit page holds a blob of a few MiB in base64; 64 MiB is far beyond the
 * largest model's and keeps a wrong file from being read whole. */
const MAX_FILE = 64 * 1024 * 1024;

function fail (code, message) {
  process.stderr.write (JSON.stringify ({ code, message }) + '\n');
  process.exit (1);
}

function parseArgs (argv) {
  const args = { file: null, prompt: '', tokens: 64, temperature: 0, seed: '1',
                 bench: false, info: false, dumpLogits: null, wasm: true,
                 checkIncremental: false,
                 engine: path.join (__dirname, '..', '..', 'src', 'kit', 'dc-kit-engine.js') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length)
        fail ('usage', a + ' needs a value');
      return argv[++i];
    };
    if (a === '--prompt')
      args.prompt = value ();
    else if (a === '--tokens')
      args.tokens = Number (value ());
    else if (a === '--temperature')
      args.temperature = Number (value ());
    else if (a === '--seed')
      args.seed = value ();
    else if (a === '--engine')
      args.engine = value ();
    else if (a === '--dump-logits')
      args.dumpLogits = value ();
    else if (a === '--check-incremental')
      args.checkIncremental = true;
    else if (a === '--no-wasm')
      args.wasm = false;
    else if (a === '--bench')
      args.bench = true;
    else if (a === '--info')
      args.info = true;
    else if (a.startsWith ('--') || args.file !== null)
      fail ('usage', 'unexpected argument ' + a);
    else
      args.file = a;
  }
  if (args.file === null)
    fail ('usage', 'usage: kit-node.js FILE.html|FILE.blob --prompt TEXT --tokens N '
          + '--temperature T --seed S [--bench] [--info] [--dump-logits FILE] [--no-wasm]');
  if (!Number.isInteger (args.tokens) || !Number.isFinite (args.temperature))
    fail ('usage', '--tokens must be an integer and --temperature a number');
  return args;
}

/* The blob inside a kit page: <script type="application/octet-stream"
 * id="dc-kit-data">BASE64</script> (docs/ARCHITECTURE.md, "Inference kit"). */
function blobFromHtml (text) {
  const m = /<script\b[^>]*\bid="dc-kit-data"[^>]*>([^<]*)<\/script>/.exec (text);
  if (m === null)
    fail ('bad-kit', 'the page has no <script id="dc-kit-data"> element');
  const b64 = m[1].replace (/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test (b64))
    fail ('bad-kit', 'the page\'s kit data is not base64');
  return new Uint8Array (Buffer.from (b64, 'base64'));
}

/* Test-only: model.forward () and windowLen are the engine's internals. */
function checkIncremental (DcKit, bytes, model, args) {
  const fresh = DcKit.loadModel (bytes, { wasm: args.wasm });
  const prompt = new Uint8Array (Buffer.from (args.prompt, 'utf8'));
  const ids = model.generate (prompt, { tokens: args.tokens, temperature: args.temperature,
                                        seed: args.seed });
  const seq = Uint8Array.from ([...(prompt.length > 0 ? prompt : [10]), ...ids]);
  let steps = 0, differing = 0;

  model.windowLen = 0;
  for (let n = 1; n <= Math.min (seq.length, model.info.seq); n++) {
    const a = model.forward (seq, 0, n);
    const b = fresh.promptLogits (seq.subarray (0, n));
    steps++;
    if (!a.every ((v, j) => Object.is (v, b[j])))
      differing++;
  }
  process.stdout.write (JSON.stringify ({ steps, differing }) + '\n');
  process.exit (differing > 0 ? 1 : 0);
}

function main () {
  const args = parseArgs (process.argv.slice (2));
  const DcKit = require (path.resolve (args.engine));
  let stat;
  try {
    stat = fs.statSync (args.file);
  } catch (e) {
    fail ('io', e.message);
  }
  if (!stat.isFile () || stat.size > MAX_FILE)
    fail ('io', args.file + ' is not a regular file of at most ' + MAX_FILE + ' bytes');
  const raw = fs.readFileSync (args.file);
  const bytes = /\.html?$/i.test (args.file) ? blobFromHtml (raw.toString ('utf8'))
                                             : new Uint8Array (raw);
  const t0 = process.hrtime.bigint ();
  let model;
  try {
    model = DcKit.loadModel (bytes, { wasm: args.wasm });
  } catch (e) {
    fail (e.code || 'error', e.message);
  }
  const t1 = process.hrtime.bigint ();
  const cpu1 = process.cpuUsage ();
  if (args.info) {
    process.stdout.write (JSON.stringify (model.info) + '\n');
    return;
  }
  if (args.dumpLogits !== null) {
    try {
      const logits = model.promptLogits (new Uint8Array (Buffer.from (args.prompt, 'utf8')));
      fs.writeFileSync (args.dumpLogits, Buffer.from (logits.buffer));
    } catch (e) {
      fail (e.code || 'error', e.message);
    }
    return;
  }
  if (args.checkIncremental) {
    checkIncremental (DcKit, bytes, model, args);
    return;
  }
  let ids;
  try {
    ids = model.generate (new Uint8Array (Buffer.from (args.prompt, 'utf8')),
                          { tokens: args.tokens, temperature: args.temperature,
                            seed: args.seed });
  } catch (e) {
    fail (e.code || 'error', e.message);
  }
  const t2 = process.hrtime.bigint ();
  if (args.bench) {
    const seconds = Number (t2 - t1) / 1e9;
    const cpu = process.cpuUsage (cpu1);
    /* CPU time as well as wall time: on a loaded machine the wall time
     * counts other processes' turns. */
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    process.stdout.write (JSON.stringify ({
      tokens: ids.length, seconds, tokens_per_s: ids.length / seconds,
      cpu_seconds: cpuSeconds, tokens_per_cpu_s: ids.length / cpuSeconds,
      load_seconds: Number (t1 - t0) / 1e9,
    }) + '\n');
    return;
  }
  process.stdout.write (JSON.stringify (ids) + '\n');
}

main ();
