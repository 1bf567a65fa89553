// SPDX-License-Identifier: GPL-3.0-or-later
//
// Writes the arrow-rs fixtures in tests/data/parquet/ (arrow-*.parquet and
// arrow-expect.json) with parquet-wasm, the Rust arrow/parquet writer built
// for WebAssembly: a second, independent writer next to pyarrow's files,
// covering what those do not: data pages v2, GZIP, UNCOMPRESSED, PLAIN
// encoding, nulls, many pages per chunk, and features the reader must
// refuse by name (BROTLI, DELTA_LENGTH_BYTE_ARRAY).
//
//   npm ci --prefix tools/bench-data
//   node tools/bench-data/make-fixtures.mjs tests/data/parquet
//
// The text is generated here (no outside data). The expected answers are
// computed from the source arrays and checked by reading each file back
// with parquet-wasm.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tableFromArrays, tableFromIPC, tableToIPC } from 'apache-arrow';
import {
  Compression, Encoding, Table, WriterPropertiesBuilder, WriterVersion, readParquet, writeParquet,
} from 'parquet-wasm';

const outDir = process.argv[2] ?? '.';
const words = ['river', 'lantern', 'naïve', 'café', 'orbit', 'ledger', 'mosaic', 'tundra',
  'quartz', 'ember', 'ζῷον', '☕', 'harbor', 'meadow', 'cipher', 'violet'];
const rows = 3001;
const text = [];
const id = new Int32Array(rows);
let state = 12345;
function next() {  // a small LCG: the same fixtures on every run
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state >>> 8;
}
for (let i = 0; i < rows; i++) {
  id[i] = i;
  if (i % 97 === 13) {
    text.push(null);
    continue;
  }
  const n = 1 + (next() % 24);
  const parts = [`row ${i}:`];
  for (let k = 0; k < n; k++)
    parts.push(words[next() % words.length]);
  // Repeats make dictionary pages worth writing.
  text.push(i % 5 === 2 ? 'a repeated line' : parts.join(' '));
}

const encoder = new TextEncoder();
const nonNull = text.filter((t) => t !== null);
const expect = {
  rows,
  nulls: rows - nonNull.length,
  text_bytes: nonNull.reduce((sum, t) => sum + encoder.encode(t).length, 0),
  first_text: nonNull[0],
  last_text: nonNull[nonNull.length - 1],
  files: {},
};

const source = tableFromArrays({ text, id });
function variant(name, configure, readable = true) {
  let builder = new WriterPropertiesBuilder()
    .setMaxRowGroupSize(700)
    .setDataPageSizeLimit(4096)
    .setWriteBatchSize(64)
    .setCreatedBy('daisychain make-fixtures.mjs (parquet-wasm)');
  builder = configure(builder);
  const wasmTable = Table.fromIPCStream(tableToIPC(source, 'stream'));
  const bytes = writeParquet(wasmTable, builder.build());
  writeFileSync(join(outDir, name), bytes);
  if (readable) {
    const back = tableFromIPC(readParquet(bytes).intoIPCStream());
    const col = back.getChild('text');
    for (let i = 0; i < rows; i++)
      if (col.get(i) !== text[i])
        throw new Error(`${name}: row ${i} does not read back`);
  }
  expect.files[name] = { readable, size: bytes.length };
}

// arrow-rs picks DELTA_BYTE_ARRAY for v2 without a dictionary: ask for PLAIN.
variant('arrow-v2-gzip-plain.parquet', (b) => b.setWriterVersion(WriterVersion.V2)
  .setCompression(Compression.GZIP).setDictionaryEnabled(false)
  .setColumnEncoding('text', Encoding.PLAIN));
variant('arrow-v1-uncompressed-dict.parquet', (b) => b.setWriterVersion(WriterVersion.V1)
  .setCompression(Compression.UNCOMPRESSED).setDictionaryEnabled(true));
variant('arrow-v2-zstd-dict.parquet', (b) => b.setWriterVersion(WriterVersion.V2)
  .setCompression(Compression.ZSTD).setDictionaryEnabled(true));
variant('arrow-v1-snappy-plain.parquet', (b) => b.setWriterVersion(WriterVersion.V1)
  .setCompression(Compression.SNAPPY).setDictionaryEnabled(false));
variant('arrow-brotli.parquet', (b) => b.setCompression(Compression.BROTLI), false);
variant('arrow-delta.parquet', (b) => b.setDictionaryEnabled(false)
  .setColumnEncoding('text', Encoding.DELTA_LENGTH_BYTE_ARRAY), false);

writeFileSync(join(outDir, 'arrow-expect.json'), JSON.stringify(expect, null, 1) + '\n');
console.log(JSON.stringify(expect.files));
