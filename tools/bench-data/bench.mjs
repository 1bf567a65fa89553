// SPDX-License-Identifier: GPL-3.0-or-later
//
// The independent side of `daisychain-cli bench data`: parquet-wasm (the Rust
// arrow/parquet reader compiled to WebAssembly) reads only the `text` column
// of FILE, ITERATIONS times, and prints one JSON line:
//   {"reader":"parquet-wasm","version":…,"rows":…,"bytes":…,"seconds":…,"mb_per_s":…}
// `bytes` (the summed UTF-8 length of the text values, counted once outside
// the timed loop) lets the caller check both readers decoded the same data.
//
// Install: npm ci --prefix tools/bench-data
import { readFileSync } from 'node:fs';
import { tableFromIPC } from 'apache-arrow';
import { readParquet } from 'parquet-wasm';

const [file, iterArg] = process.argv.slice(2);
const iterations = Math.max(1, parseInt(iterArg ?? '5', 10));
const buffer = new Uint8Array(readFileSync(file));
const options = { columns: ['text'] };

// Count rows and bytes once, through Arrow JS, for the cross-check.
const check = tableFromIPC(readParquet(buffer, options).intoIPCStream());
const text = check.getChild('text');
let bytes = 0;
for (const chunk of text.data) {
  const offsets = chunk.valueOffsets;
  bytes += Number(offsets[chunk.length] - offsets[0]);
}

// Timed: decoding into Arrow arrays in WebAssembly memory is the reader's work.
readParquet(buffer, options).free();  // warm-up (JIT, allocator)
const start = process.hrtime.bigint();
let rows = 0;
for (let i = 0; i < iterations; i++) {
  const table = readParquet(buffer, options);
  rows = table.numBatches > 0 ? check.numRows : 0;
  table.free();
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
const version = JSON.parse(readFileSync(new URL('./node_modules/parquet-wasm/package.json',
                                             import.meta.url))).version;

console.log(JSON.stringify({
  reader: 'parquet-wasm',
  version,
  rows,
  bytes,
  iterations,
  seconds,
  mb_per_s: (bytes * iterations) / seconds / 1e6,
}));
