// ONNX Runtime's time per inference for bench_ipu.py: loads the model,
// runs it once to warm up, then `runs` times; prints the median as JSON.
// usage: node ort_bench.js model.onnx image.f32 runs threads
// (needs `npm install onnxruntime-node --ignore-scripts` where NODE_PATH points)
const ort = require('onnxruntime-node');
const fs = require('fs');
(async () => {
  const [model, image, runs, threads] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: 'all'});
  const buf = fs.readFileSync(image);
  const data = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const input = new ort.Tensor('float32', data, [1, 3, 224, 224]); // torchvision input
  const feeds = {}; feeds[session.inputNames[0]] = input;
  await session.run(feeds); // warm-up
  const times = [];
  for (let i = 0; i < Number(runs); ++i) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({median_ms: times[Math.floor(times.length / 2)], version: ort.env.versions ? ort.env.versions.common : ''}));
})().catch(e => { console.error(String(e)); process.exit(1); });
