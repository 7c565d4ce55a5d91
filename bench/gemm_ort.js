#!/usr/bin/env node
// gemm_ort.js - ONNX Runtime's MatMul (CPU provider, onnxruntime-node) timed per shape
// for bench/gemm_peers.py, the way bench/gemm_shapes.c times ftengine and OpenBLAS:
// per call the wall time and the process's CPU time (process.cpuUsage, all threads).
//
//   node bench/gemm_ort.js --models LIST.json [--threads N] [--rounds R] [--iters N]
//                          [--no-spin]
//
// LIST.json: [{"name": ..., "m": M, "n": N, "k": K, "model": "file.onnx"}, ...], each
// model Y [M, N] = X [M, K] @ W [K, N] with W an initializer (ORT packs it once at
// session creation, as ftengine's plans do). onnxruntime-node is found through
// NODE_PATH or --ort DIR (a node_modules folder). Prints the same columns as
// gemm_shapes with impl "ort".
'use strict';
const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const a = { threads: 1, rounds: 5, iters: 5, models: null, spin: true, ort: null };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i];
    if (v === '--threads') a.threads = parseInt(argv[++i], 10);
    else if (v === '--rounds') a.rounds = parseInt(argv[++i], 10);
    else if (v === '--iters') a.iters = parseInt(argv[++i], 10);
    else if (v === '--models') a.models = argv[++i];
    else if (v === '--ort') a.ort = argv[++i];
    else if (v === '--no-spin') a.spin = false;
    else throw new Error(`unknown argument ${v}`);
  }
  if (!a.models) throw new Error('--models LIST.json is required');
  if (!(a.threads >= 1 && a.rounds >= 1 && a.iters >= 1))
    throw new Error('--threads, --rounds and --iters must be positive');
  return a;
}

function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function wallMs() {
  return Number(process.hrtime.bigint()) / 1e6;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = require(a.ort ? path.join(a.ort, 'onnxruntime-node') : 'onnxruntime-node');
  const list = JSON.parse(fs.readFileSync(a.models, 'utf8'));
  const opts = {
    intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', executionProviders: ['cpu'],
    extra: { session: { intra_op: { allow_spinning: a.spin ? '1' : '0' } } },
  };
  const jobs = [];
  for (const e of list) {
    const s = await ort.InferenceSession.create(e.model, opts);
    const x = new Float32Array(e.m * e.k);
    for (let i = 0; i < x.length; i++) x[i] = ((i * 2654435761) % 1000) / 1000 - 0.5;
    jobs.push({ e, s, feeds: { X: new ort.Tensor('float32', x, [e.m, e.k]) }, wall: [], cpu: [] });
  }
  console.log(`# ort: onnxruntime-node ${ort.env.versions ? ort.env.versions.common : '?'}, ` +
              `${a.threads} threads, spinning ${a.spin ? 'on' : 'off'}, ${a.rounds} rounds x ${a.iters} calls`);
  for (let r = 0; r <= a.rounds; r++) {
    for (const j of jobs) {
      for (let it = 0; it < (r ? a.iters : 1); it++) {
        const w0 = wallMs(), c0 = cpuMs();
        await j.s.run(j.feeds);
        const c1 = cpuMs(), w1 = wallMs();
        if (r) {
          j.wall.push(w1 - w0);
          j.cpu.push(c1 - c0);
        }
      }
    }
  }
  const pad = (v, n) => String(v).padStart(n);
  console.log(`${'shape'.padEnd(18)} ${pad('M', 6)} ${pad('N', 6)} ${pad('K', 6)} ${'impl'.padEnd(10)} ` +
              `${pad('best_ms', 10)} ${pad('median_ms', 10)} ${pad('cpu_ms', 10)} ${pad('GF/s', 9)} ${pad('GF/cpu-s', 9)}`);
  for (const j of jobs) {
    const w = j.wall.slice().sort((x, y) => x - y), c = j.cpu.slice().sort((x, y) => x - y);
    const gf = 2 * j.e.m * j.e.n * j.e.k * 1e-9;
    console.log(`${j.e.name.padEnd(18)} ${pad(j.e.m, 6)} ${pad(j.e.n, 6)} ${pad(j.e.k, 6)} ${'ort'.padEnd(10)} ` +
                `${pad(w[0].toFixed(3), 10)} ${pad(w[w.length >> 1].toFixed(3), 10)} ${pad(c[0].toFixed(3), 10)} ` +
                `${pad((gf / (w[0] * 1e-3)).toFixed(1), 9)} ${pad((gf / (c[0] * 1e-3)).toFixed(1), 9)}`);
  }
}

main().catch((e) => {
  console.error(`gemm_ort.js: ${e.message}`);
  process.exit(1);
});
