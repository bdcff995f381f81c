#!/usr/bin/env node
'use strict';
// Reference executor: runs an ONNX model with onnxruntime (CPU execution provider)
// on inputs stored as .npy files and writes each output as .npy.
//
//   node ort-run.js MODEL.onnx --inputs DIR [--outputs DIR] [--repeat N] [--warmup N]
//                   [--threads N] [--info]
//
// Reads DIR/<input name>.npy for every graph input and writes OUT/<output name>.npy.
// With --repeat N the model is run N times (after --warmup runs, default 0); each run's
// time is printed as `run I/N: X ms`, and the last line is machine-readable:
//   mean_ms=12.34 median_ms=12.30 min_ms=12.01 load_ms=80.1 runs=N threads=1
// --info prints the model's inputs and outputs as JSON and exits.

const fs = require('fs');
const path = require('path');
const { readNpy, writeNpy } = require('./npy');

function usage(msg) {
  if (msg) console.error(`ort-run: ${msg}`);
  console.error('usage: node ort-run.js MODEL.onnx --inputs DIR [--outputs DIR] [--repeat N] ' +
    '[--warmup N] [--threads N] [--info]');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { model: null, inputs: null, outputs: null, repeat: 1, warmup: 0, threads: 1, info: false };
  const intFlag = (name, v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) usage(`${name} expects a non-negative integer, got '${v}'`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} expects a value`);
      return argv[++i];
    };
    if (a === '--inputs') opts.inputs = next();
    else if (a === '--outputs') opts.outputs = next();
    else if (a === '--repeat') opts.repeat = intFlag(a, next());
    else if (a === '--warmup') opts.warmup = intFlag(a, next());
    else if (a === '--threads') opts.threads = intFlag(a, next());
    else if (a === '--info') opts.info = true;
    else if (a === '-h' || a === '--help') usage();
    else if (a.startsWith('-')) usage(`unknown option ${a}`);
    else if (opts.model === null) opts.model = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!opts.model) usage('missing MODEL.onnx');
  if (!opts.info && !opts.inputs) usage('missing --inputs DIR');
  if (opts.repeat < 1) usage('--repeat must be at least 1');
  return opts;
}

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    console.error(`ort-run: cannot load onnxruntime-node (${e.message.split('\n')[0]}).\n` +
      `  Install it with: cd ${__dirname} && ONNXRUNTIME_NODE_INSTALL=skip npm install`);
    process.exit(2);
  }
}

// Checks an .npy tensor against the model's declared input type and shape.
function checkInput(meta, t, file) {
  if (!meta || !meta.isTensor) return;
  if (meta.type !== t.dtype) {
    throw new Error(`input '${meta.name}': ${file} holds ${t.dtype}, but the model expects ${meta.type}`);
  }
  const want = meta.shape;
  const bad = want.length !== t.shape.length ||
    want.some((d, i) => typeof d === 'number' && d >= 0 && d !== t.shape[i]);
  if (bad) {
    const fmt = (s) => `[${s.map((d) => (typeof d === 'number' ? d : `'${d}'`)).join(', ')}]`;
    throw new Error(`input '${meta.name}': ${file} has shape ${fmt(t.shape)}, but the model expects ${fmt(want)}`);
  }
}

function fileFor(dir, name) {
  if (name.includes('/') || name.includes('\\') || name === '' || name === '.' || name === '..') {
    throw new Error(`tensor name '${name}' cannot be used as a file name`);
  }
  return path.join(dir, `${name}.npy`);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(opts.model)) usage(`model file not found: ${opts.model}`);
  const ort = loadOrt();
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(opts.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const inputMeta = session.inputMetadata || session.inputNames.map((name) => ({ name }));
  const outputMeta = session.outputMetadata || session.outputNames.map((name) => ({ name }));

  if (opts.info) {
    console.log(JSON.stringify({ inputs: inputMeta, outputs: outputMeta }, null, 2));
    return;
  }
  if (!fs.statSync(opts.inputs, { throwIfNoEntry: false })?.isDirectory()) {
    usage(`--inputs directory not found: ${opts.inputs}`);
  }

  const feeds = {};
  for (let i = 0; i < session.inputNames.length; i++) {
    const name = session.inputNames[i];
    const file = fileFor(opts.inputs, name);
    if (!fs.existsSync(file)) {
      throw new Error(`missing input file ${file} for model input '${name}' ` +
        `(the model's inputs are: ${session.inputNames.join(', ')})`);
    }
    const t = readNpy(file);
    checkInput(inputMeta.find((m) => m.name === name), t, file);
    feeds[name] = new ort.Tensor(t.dtype, t.data, t.shape);
  }

  const runs = opts.repeat;
  for (let i = 0; i < opts.warmup; i++) await session.run(feeds);
  const times = [];
  let results;
  for (let i = 0; i < runs; i++) {
    const s = process.hrtime.bigint();
    results = await session.run(feeds);
    const ms = Number(process.hrtime.bigint() - s) / 1e6;
    times.push(ms);
    if (runs > 1) console.log(`run ${i + 1}/${runs}: ${ms.toFixed(3)} ms`);
  }

  if (opts.outputs) {
    fs.mkdirSync(opts.outputs, { recursive: true });
    for (const name of session.outputNames) {
      const t = results[name];
      if (t.type === 'string') throw new Error(`output '${name}' is a string tensor; .npy output is not supported`);
      writeNpy(fileFor(opts.outputs, name), t.type, t.dims.map(Number), t.data);
    }
  }

  const sorted = [...times].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const mean = times.reduce((a, b) => a + b, 0) / times.length;
  console.log(`mean_ms=${mean.toFixed(3)} median_ms=${median.toFixed(3)} min_ms=${sorted[0].toFixed(3)} ` +
    `load_ms=${loadMs.toFixed(3)} runs=${runs} threads=${opts.threads}`);
}

main().catch((e) => {
  console.error(`ort-run: error: ${e.message}`);
  process.exit(1);
});
