// Times an ONNX model on ONNX Runtime's CPU provider, for the benchmarks'
// comparison with the IPU model's host time on the same cores.
//
//   NODE_PATH=DIR/node_modules node ort_time.js model.onnx inputs.json RUNS
//
// inputs.json: {"name": {"type": "int64"|"float32"|..., "dims": [...],
// "data": [...]}}. Prints "ORT <milliseconds per run>" (the mean of RUNS
// runs after one warm-up run) and the first output's first values.
// onnxruntime-node comes from npm (`npm install --ignore-scripts --prefix DIR
// onnxruntime-node`; its CPU library is in the package, the install script
// only fetches GPU providers).
const ort = require('onnxruntime-node');
const fs = require('fs');
const os = require('os');

async function main() {
  const [model, inputsPath, runsText] = process.argv.slice(2);
  const runs = parseInt(runsText || '5', 10);
  const spec = JSON.parse(fs.readFileSync(inputsPath, 'utf8'));
  const arrays = {
    int64: (d) => BigInt64Array.from(d.map(BigInt)),
    int32: (d) => Int32Array.from(d),
    float32: (d) => Float32Array.from(d),
    float64: (d) => Float64Array.from(d),
    bool: (d) => Uint8Array.from(d),
  };
  const feeds = {};
  for (const [name, t] of Object.entries(spec))
    feeds[name] = new ort.Tensor(t.type, arrays[t.type](t.data), t.dims);
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: os.cpus().length,
    graphOptimizationLevel: 'all',
  });
  let result = await session.run(feeds);
  const start = process.hrtime.bigint();
  for (let i = 0; i < runs; ++i)
    result = await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - start) / 1e6 / runs;
  const first = result[session.outputNames[0]].data;
  console.log(`ORT ${ms.toFixed(3)}`);
  console.log(`first ${Array.from(first.slice(0, 4)).join(' ')}`);
}

main().catch((e) => {
  console.error(`ort_time: ${e.message}`);
  process.exit(1);
});
