#!/usr/bin/env node
// ort_runner.js - ONNX Runtime's CPU execution provider for bench/peers.py, through
// the npm package onnxruntime-node (the native runtime, where the Python package is
// not installable). Declared in bench/baselines/package.json; install it with
//     npm --prefix bench/baselines install --ignore-scripts
// (its install script only fetches GPU binaries, from a host these machines cannot
// reach; the CPU provider ships in the package itself).
//
// The same line protocol as ort_runner.py and torch_runner.py: JSON commands from the
// command line, then (with --serve) one per line on stdin; one JSON reply per line.
//   {"cmd":"info"}
//   {"cmd":"load","model":"m.onnx"}                    a session (graph optimisations: all)
//   {"cmd":"time","inputs":"in.safetensors","iters":N,"warmup":W}
//   {"cmd":"run","inputs":"in.safetensors","out":"out.safetensors"}
//   {"cmd":"end_profiling"}                             (with --profile) writes PREFIX_<date>.json
// Session options: --threads N (intra-op; inter-op 1, sequential execution, the CPU
// provider only), --no-spin (intra-op threads block instead of spinning between
// runs), --opt all|extended|basic|disabled, --optimized-out FILE (the graph
// after ORT's rewrites, to count its fused nodes), --profile PREFIX (ORT's per-node
// profile of every run).
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

const DTYPES = { F32: ['float32', Float32Array], F64: ['float64', Float64Array], I64: ['int64', BigInt64Array],
                 I32: ['int32', Int32Array], U8: ['uint8', Uint8Array], I8: ['int8', Int8Array] };
const MAX_SESSIONS = 8;
const BY_TYPE = Object.fromEntries(Object.entries(DTYPES).map(([k, v]) => [v[0], k]));

function readSafetensors(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 8) throw new Error(`${file}: too short for a safetensors header`);
  const n = Number(buf.readBigUInt64LE(0));
  if (n > buf.length - 8) throw new Error(`${file}: header length ${n} exceeds the file: truncated?`);
  const hdr = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  delete hdr.__metadata__;
  const out = {};
  for (const [name, e] of Object.entries(hdr)) {
    const t = DTYPES[e.dtype];
    if (!t) throw new Error(`${file}: ${name}: dtype ${e.dtype} not supported here`);
    const [b, end] = e.data_offsets;
    const numel = e.shape.reduce((a, x) => a * x, 1);
    if (end - b !== numel * t[1].BYTES_PER_ELEMENT || 8 + n + end > buf.length)
      throw new Error(`${file}: ${name}: data_offsets do not fit shape ${JSON.stringify(e.shape)}`);
    // a copy, aligned for the typed array
    const raw = Uint8Array.prototype.slice.call(buf, 8 + n + b, 8 + n + end);
    out[name] = { type: t[0], shape: e.shape, data: new t[1](raw.buffer, raw.byteOffset, numel) };
  }
  return out;
}

function writeSafetensors(file, tensors) {
  const hdr = {};
  const blobs = [];
  let off = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const st = BY_TYPE[t.type];
    if (!st) throw new Error(`${name}: output type ${t.type} not writable`);
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    hdr[name] = { dtype: st, shape: t.dims.map(Number), data_offsets: [off, off + bytes.length] };
    off += bytes.length;
    blobs.push(bytes);
  }
  let h = Buffer.from(JSON.stringify(hdr), 'utf8');
  h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  const tmp = file + '.tmp';
  fs.writeFileSync(tmp, Buffer.concat([len, h, ...blobs]));
  fs.renameSync(tmp, file);
}

function parseArgs(argv) {
  const a = { threads: 1, opt: 'all', serve: false, commands: [], optimizedOut: null, profile: null, spin: true };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i];
    if (v === '--threads') a.threads = parseInt(argv[++i], 10);
    else if (v === '--opt') a.opt = argv[++i];
    else if (v === '--optimized-out') a.optimizedOut = argv[++i];
    else if (v === '--profile') a.profile = argv[++i];
    else if (v === '--serve') a.serve = true;
    else if (v === '--no-spin') a.spin = false;
    else if (v.startsWith('--')) throw new Error(`unknown option ${v}`);
    else a.commands.push(v);
  }
  if (!(a.threads >= 1)) throw new Error('--threads needs a positive integer');
  if (!['all', 'extended', 'basic', 'disabled'].includes(a.opt))
    throw new Error(`--opt ${a.opt}: all|extended|basic|disabled`);
  return a;
}

class Runner {
  constructor(ort, a) {
    this.ort = ort;
    this.a = a;
    this.session = null;
    this.sessions = new Map(); // model path -> session, the most recent last (a few shapes stay loaded)
  }

  options() {
    const o = { executionProviders: ['cpu'], graphOptimizationLevel: this.a.opt, intraOpNumThreads: this.a.threads,
                interOpNumThreads: 1, executionMode: 'sequential' };
    if (this.a.optimizedOut) o.optimizedModelFilePath = this.a.optimizedOut;
    if (this.a.profile) { o.enableProfiling = true; o.profileFilePrefix = this.a.profile; }
    if (!this.a.spin) o.extra = { session: { intra_op: { allow_spinning: '0' } } };
    return o;
  }

  info() {
    let pkg = '?';
    try { pkg = require('onnxruntime-node/package.json').version; } catch (e) { /* older layouts */ }
    return { runtime: 'ONNX Runtime', route: `onnxruntime-node ${pkg} (Node ${process.version})`,
             version: (this.ort.env.versions && this.ort.env.versions.node) || pkg, provider: 'CPUExecutionProvider',
             threads: this.a.threads, inter_op_threads: 1, graph_optimization: this.a.opt, spinning: this.a.spin,
             backend: 'MLAS (ORT\'s own kernels)', arch: `${process.platform}-${process.arch}` };
  }

  async load(c) {
    const t0 = process.hrtime.bigint();
    const cached = this.sessions.has(c.model);
    if (cached) {
      this.session = this.sessions.get(c.model);
      this.sessions.delete(c.model);
    } else {
      while (this.sessions.size >= MAX_SESSIONS) {
        const [oldest, s] = this.sessions.entries().next().value;
        this.sessions.delete(oldest);
        await s.release();
      }
      this.session = await this.ort.InferenceSession.create(c.model, this.options());
    }
    this.sessions.set(c.model, this.session);
    return { model: c.model, inputs: this.session.inputNames, outputs: this.session.outputNames, cached,
             load_ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  }

  feeds(file) {
    if (!this.session) throw new Error('no model loaded ({"cmd":"load"} first)');
    const st = readSafetensors(file);
    const f = {};
    for (const name of this.session.inputNames) {
      if (!st[name]) throw new Error(`${file} has no input ${name}`);
      f[name] = new this.ort.Tensor(st[name].type, st[name].data, st[name].shape);
    }
    return f;
  }

  async time(c) {
    const f = this.feeds(c.inputs);
    const iters = c.iters || 10;
    const warmup = c.warmup === undefined ? 2 : c.warmup;
    let t0 = process.hrtime.bigint();
    await this.session.run(f);
    const first = Number(process.hrtime.bigint() - t0) / 1e6;
    for (let i = 0; i < warmup; i++) await this.session.run(f);
    const ts = [];
    for (let i = 0; i < iters; i++) {
      t0 = process.hrtime.bigint();
      await this.session.run(f);
      ts.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    return { first_ms: first, warmup, samples_ms: ts };
  }

  async run(c) {
    const out = await this.session.run(this.feeds(c.inputs));
    writeSafetensors(c.out, out);
    return { out: c.out, outputs: Object.keys(out) };
  }

  async handle(c) {
    try {
      let r;
      if (c.cmd === 'info') r = this.info();
      else if (c.cmd === 'load') r = await this.load(c);
      else if (c.cmd === 'time') r = await this.time(c);
      else if (c.cmd === 'run') r = await this.run(c);
      else if (c.cmd === 'end_profiling') { this.session.endProfiling(); r = {}; }
      else throw new Error(`unknown command ${JSON.stringify(c.cmd)}`);
      r.ok = true;
      return r;
    } catch (e) {
      return { ok: false, error: String(e && e.message ? e.message : e).slice(0, 400) };
    }
  }
}

async function main() {
  let a;
  try {
    a = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.log(JSON.stringify({ ok: false, error: e.message }));
    return 2;
  }
  let ort;
  try {
    // the package next to this file (npm --prefix bench/baselines install), else NODE_PATH's
    module.paths.unshift(path.join(__dirname, 'node_modules'));
    ort = require('onnxruntime-node');
  } catch (e) {
    console.log(JSON.stringify({ ok: false, error: `onnxruntime-node is not installed (${e.code || e.message}): ` +
      'npm --prefix bench/baselines install --ignore-scripts' }));
    return 3;
  }
  const r = new Runner(ort, a);
  console.log(JSON.stringify({ ok: true, ready: 'onnxruntime-node' }));
  let bad = 0;
  for (const c of a.commands) {
    const res = await r.handle(JSON.parse(c));
    bad += !res.ok;
    console.log(JSON.stringify(res));
  }
  if (a.serve) {
    const rl = readline.createInterface({ input: process.stdin, terminal: false });
    for await (const line of rl) {
      if (!line.trim()) continue;
      const c = JSON.parse(line);
      if (c.cmd === 'quit') break;
      console.log(JSON.stringify(await r.handle(c)));
    }
    rl.close();
  }
  for (const s of r.sessions.values()) await s.release();
  return bad ? 1 : 0;
}

main().then((rc) => { process.exitCode = rc; });
