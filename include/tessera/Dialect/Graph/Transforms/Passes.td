//===- Passes.td - graph dialect passes ---------------------*- tablegen -*-===//

#ifndef TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_TD
#define TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def GraphInferShapes : Pass<"graph-infer-shapes", "::mlir::func::FuncOp"> {
  let summary = "Propagate static shapes through graph ops and the signature";
  let description = [{
    Re-runs every graph op's type inference in program order and refines
    result types that are less static than what inference yields (for example
    after an input's `?` dims were fixed), then updates the function's result
    types to match its `func.return`.

    Assumes: operands are ranked tensors. Guarantees: every op implementing
    InferTypeOpInterface has exactly its inferred result types. An op whose
    inference fails (shapes that do not fit together) is reported with its
    location and the pass fails.
  }];
  let dependentDialects = ["::tessera::graph::GraphDialect"];
}

def GraphRequireStaticShapes
    : Pass<"graph-require-static-shapes", "::mlir::func::FuncOp"> {
  let summary = "Fail on any tensor whose shape is not fully static";
  let description = [{
    Tile mapping plans memory per tile and needs every size. This pass names
    the first value of each op with a dynamic dim, and, for function
    arguments, the input to give a shape with `--input-shape`.
  }];
}

def GraphFoldGlobalLayouts
    : Pass<"graph-fold-global-layouts", "::mlir::ModuleOp"> {
  let summary = "Apply transposes and reshapes of weights once, at compile time";
  let description = [{
    A `graph.transpose` or `graph.reshape` whose operand is read from an
    immutable `ml_program.global` (Gemm's `transB`, exported Linear layers)
    would move the weight on every run. This pass applies it to the global's
    payload instead: the op is replaced by a load of a new global holding the
    moved data (a reshape shares the old payload). The old global is left for
    `symbol-dce` once it has no users.

    Assumes: globals hold `dense_resource` payloads of byte-sized elements
    (as the importers create them); other globals are left alone.
    Guarantees: no transpose or reshape reads a foldable global directly.
  }];
  let dependentDialects = ["::mlir::ml_program::MLProgramDialect"];
}


//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def GraphBuildLoss : Pass<"graph-build-loss", "::mlir::ModuleOp"> {
  let summary = "Append a scalar training loss to @main";
  let description = [{
    Computes a loss from one of @main's outputs (the model's prediction) and
    a new `labels` argument, and returns it as @main's first result, marked
    `graph.loss`; the model's outputs follow it. Losses, each the mean over
    the samples (PyTorch's default reduction) or their sum:
    `cross-entropy` (from logits; `label-smoothing`, `ignore-index`),
    `nll` (from log-probabilities), `mse`, `l1`, `bce-with-logits`.
    `loss=output:NAME` takes a scalar the model computes itself: no label
    argument is added.

    Assumes: @main returns ranked static tensors; the prediction is
    N x C (class scores) for cross-entropy and nll, and shaped like the
    labels otherwise. Guarantees: exactly one result of @main carries
    `graph.loss` and is a 0-d float tensor. A prediction of the wrong shape,
    or an unknown output name, is an error naming what is expected.
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"cross-entropy\"",
           "cross-entropy, nll, mse, l1, bce-with-logits, or output:NAME">,
    Option<"output", "output", "std::string", "\"\"",
           "the output the loss reads (default: the first)">,
    Option<"labelSmoothing", "label-smoothing", "double", "0.0",
           "cross-entropy's label smoothing, in [0, 1)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "a class label that contributes no loss (cross-entropy, nll)">,
    Option<"reduction", "reduction", "std::string", "\"mean\"",
           "mean or sum over the samples">,
  ];
  let dependentDialects = ["::tessera::graph::GraphDialect"];
}

def GraphAutodiff : Pass<"graph-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode gradients of @main's loss with respect to its weights";
  let description = [{
    Builds, in graph ops after the forward ones, the gradient of the result
    marked `graph.loss` with respect to every trainable weight, and returns
    each as a new result of @main marked `graph.gradient_of = @global`.
    Trainable: a float `ml_program.global` read by the forward graph through
    an operand the loss is differentiable in (a batch norm's running
    statistics and a gather's indices are not), and not named in `freeze`.
    Each op's rule is in GradientRules.cpp; an op on a path from a weight to
    the loss without a rule is an error naming the op and its location,
    never a silent zero.

    Assumes: @main has one block in program order, exactly one result marked
    `graph.loss`, static shapes. Guarantees: one gradient result per
    trainable global, shaped like it; the forward results are unchanged.
  }];
  let options = [
    ListOption<"freeze", "freeze", "std::string",
               "weights that get no gradient (global names)">,
  ];
  let dependentDialects = ["::tessera::graph::GraphDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def GraphOptimizerUpdate : Pass<"graph-optimizer-update", "::mlir::ModuleOp"> {
  let summary = "Apply an optimizer step to every weight that has a gradient";
  let description = [{
    Consumes @main's results marked `graph.gradient_of`: each weight becomes a
    mutable global read with `ml_program.global_load` and written with
    `ml_program.global_store` after the update. Optimizer state (momentum,
    moments, the step count) lives in new mutable globals named
    `<weight>/<slot>`, starting at zero. Hyperparameters (learning rate,
    momentum, weight decay, ...) are mutable globals `optimizer.<name>`
    marked `graph.hyperparameter`, never stored by the program: the runtime
    may change them between runs without a recompile. Optimizers follow
    torch.optim's update rules: `sgd` (momentum, dampening, nesterov,
    weight-decay), `adam` and `adamw` (bias correction, amsgrad), `rmsprop`
    (alpha, centered, momentum); `lamb` follows PopTorch's LAMB (bias
    correction, max-weight-norm, the trust ratio ||w|| / ||update||). Every
    optimizer takes `max-grad-norm`: the gradients are first scaled down so
    that their global norm is at most that (torch.nn.utils.clip_grad_norm_).

    PopTorch's accumulator types are structural keys of the spec, each
    `float32` or `float16`: `accum-type` (the `<weight>/grad_accum` slots;
    by default the gradient's type), `first-order-momentum-accum-type`
    (momentum buffers, exp_avg, grad_avg) and
    `second-order-momentum-accum-type` (exp_avg_sq, max_exp_avg_sq,
    square_avg), both by default the update's type (fp32 for fp32 and fp16
    weights). State is read into and updated in the
    update's type and rounded to its own type to nearest when stored.

    An fp16 weight is updated in fp32, with fp32 optimizer state unless the
    accumulator types say otherwise, and the result rounded to fp16 once: to nearest, or with `stochastic-rounding`
    stochastically (graph.stochastic_round, keyed by the `rng.seed` and
    `rng.counter` state), so that updates smaller than half an fp16 step
    add up in expectation instead of vanishing.

    With `accumulate=G` > 1 (gradient accumulation, PopTorch's
    gradientAccumulation) every run adds its gradient to a `<weight>/grad_accum`
    slot and counts micro-batches in `optimizer.micro_step` (marked
    `graph.micro_batch_counter`); the update is committed (every store
    selects between the new and the old value, and is marked
    `graph.per_update`) on the G-th, from the accumulated gradient divided
    by G (`accumulation-reduction=mean`, as a batch G times larger) or not
    (`sum`). With `replicas=R` > 1 as well, the accumulated gradients are
    summed over the replicas here (`graph.cross_replica_sum`, divided by R
    for `replica-reduction=mean`), once per weight update, instead of each
    micro-batch's by graph-replicate.

    Assumes: gradients shaped like their weights. Guarantees: no result of
    @main carries `graph.gradient_of`; every store follows every load of its
    global.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd, adam, adamw, rmsprop or lamb, with hyperparameters as "
           "name:key=value,key=value (kebab-case keys)">,
    Option<"accumulate", "accumulate", "int64_t", "1",
           "micro-batches whose gradients make one weight update">,
    Option<"accumulationReduction", "accumulation-reduction", "std::string",
           "\"mean\"", "mean or sum of the accumulated gradients">,
    Option<"stochasticRounding", "stochastic-rounding", "bool", "false",
           "round fp16 weights' updates stochastically (graph.stochastic_round)">,
    Option<"replicas", "replicas", "int64_t", "1",
           "replicas whose accumulated gradients are summed (with accumulate > 1)">,
    Option<"replicaReduction", "replica-reduction", "std::string", "\"mean\"",
           "how accumulated gradients combine over replicas: mean or sum">,
  ];
  let dependentDialects = ["::tessera::graph::GraphDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def GraphAssignStages : Pass<"graph-assign-stages", "::mlir::ModuleOp"> {
  let summary = "Place every op of @main in a pipeline stage on an IPU";
  let description = [{
    Three sources of placement, one result: every op of @main gets
    `graph.stage` and `graph.ipu` (stages follow the program's order; a
    stage runs on one IPU, and several stages may share one).

    - `pipeline=manual` without `layers-per-ipu`: the annotations the
      importers carried (PopART's `__ipu_number` and `__pipeline_stage` node
      attributes). An op without one takes the placement of the op before it
      in program order (PopTorch's BeginBlock: a block runs until the next
      one starts); ops before the first annotation run on IPU 0. An
      annotation with an IPU but no stage is its own stage number (PopTorch's
      AutoStage.SameAsIpu). Without any annotation everything is stage 0 on
      IPU 0.
    - `pipeline=manual` with `blocks=encoder.layers.2=1,...`: PopTorch's
      BeginBlock, by module path (the Python API's tessera.BeginBlock passes
      them; TorchScript keeps module paths in op names). The first op whose
      name lies under a block's path starts that block: it and what follows
      run there until the next block starts (before the first, IPU 0). A
      block without a stage is its own IPU's stage number. An op the model
      places itself (an annotation; the TorchScript importer's mark for the
      ops traced inside a tessera.Block) starts its placement the same way.
    - `pipeline=manual` with `layers-per-ipu=0,4,4,4`: optimum-graphcore's
      meaning. The model's layers are its repeated blocks, found from the op
      names (ONNX node names or TorchScript module paths: the path up to an
      index, at the shallowest depth where several such paths exist, such as
      `encoder/layer.3`). Entry k
      is the number of layers on IPU k, -1 a wildcard that shares the rest
      evenly, 0 an IPU without layers. Ops before the first layer (the
      embeddings) run on IPU 0, ops after the last on the last layer's IPU,
      but for an output head that reads a weight the embeddings read (tied
      weights): it runs with them, on IPU 0, as a last stage.
    - `pipeline=auto`: contiguous stages, one per IPU, whose slowest stage
      is fastest under the cost model (CostModel::opRooflineCycles per op,
      three times that when training, plus its inputs over the IPU-Links),
      with each IPU's weights (times `weight-copies`), activation stashes
      (training, micro-batches in flight times the stage's results) and
      received inputs within `resident-share` of its memory (the rest is for
      code, temporaries and pieces spread unevenly, which only tile planning
      knows). With `recompute=stage-inputs` (the step's graph-recompute
      mode) a stage stashes its inputs per micro-batch in flight and holds
      one micro-batch's results, and its forward runs twice (four times the
      roofline); other modes are costed as none, the bound that holds for
      them. Training adds each weight's update (its elements times
      `update-ops-per-element` vector operations, once per `micro-batches`)
      to the first op that reads it. Found exactly by dynamic
      programming (StagePartition.h).

    The chosen stages are recorded on the module as `graph.stages` (IPU, op
    count, estimated cycles and bytes of each), which the compile report
    prints. Errors: an op reading a value computed in a later stage, an IPU
    outside `num-ipus`, a `layers-per-ipu` that does not match the model's
    layers, a model no cut fits.

    Assumes: @main has one block in program order, static shapes.
    Guarantees: every op of @main is placed; no value flows to an earlier
    stage.
  }];
  let options = [
    Option<"pipeline", "pipeline", "std::string", "\"manual\"",
           "manual (annotations or layers-per-ipu) or auto">,
    Option<"numIPUs", "num-ipus", "int64_t", "1", "IPUs to place ops on">,
    ListOption<"layersPerIpu", "layers-per-ipu", "int64_t",
               "layers on each IPU (optimum-graphcore's layers_per_ipu)">,
    ListOption<"blocks", "blocks", "std::string",
               "PopTorch's BeginBlock by module path: PATH=IPU or PATH=IPU:STAGE">,
    Option<"targetName", "target", "std::string", "\"ipu2\"",
           "the IPU whose cost model and memory auto uses">,
    Option<"tilesPerIPU", "tiles-per-ipu", "int64_t", "0",
           "tiles of each IPU (0: the target's)">,
    Option<"training", "training", "bool", "false",
           "cost the backward pass and weight update too">,
    Option<"pipelined", "pipelined", "bool", "false",
           "stages overlap: training stashes 2 (P - s) - 1 micro-batches">,
    Option<"weightCopies", "weight-copies", "int64_t", "1",
           "bytes held per weight byte (weights, gradients, optimizer state)">,
    Option<"residentShare", "resident-share", "double", "0.75",
           "share of an IPU's memory a stage's weights, stashes and inputs may "
           "take (the rest holds code, temporaries and uneven spreads)">,
    Option<"updateOpsPerElement", "update-ops-per-element", "int64_t", "0",
           "vector operations the optimizer's update takes per weight element "
           "(training): costed once per weight update">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "micro-batches per weight update, over which an update's cost is "
           "shared">,
    Option<"recompute", "recompute", "std::string", "\"none\"",
           "graph-recompute's mode the step will be built with: with "
           "stage-inputs, a "
           "stage stashes its inputs and computes its forward pass again">,
  ];
}

def GraphRecompute : Pass<"graph-recompute", "::mlir::ModuleOp"> {
  let summary = "Compute forward activations again in the backward pass instead of keeping them";
  let description = [{
    After graph-autodiff, the backward pass (ops marked `graph.backward`)
    reads forward activations, which stay live from the forward pass to
    their backward reader: a training step's peak memory. This pass keeps
    only the checkpoints and computes every other activation a backward op
    reads again from them, right before its first backward reader (the
    clones marked `graph.recomputed`, placed where the op they repeat runs;
    lowering keeps the mark, so CSE never merges a clone with its original).
    Results do not change; memory does, at the cost of at most one more
    forward pass.

    Checkpoints: the results of ops marked `graph.checkpoint` (a user's,
    from ONNX's `__recompute_checkpoint` node attribute), plus by `mode`:
    - `checkpoint-every-layer` (optimum-graphcore's
      recompute_checkpoint_every_layer): each layer's results read outside
      it (layers as graph-assign-stages finds them); ops outside every
      layer (embeddings, the head) are kept;
    - `stage-inputs` (PopART's pipeline recomputation): the values each
      pipeline stage receives from an earlier one; the last stage's ops are
      kept (its backward pass follows its forward at once);
    - `auto`: of the candidates (every layer's results; the forward ops cut
      into k segments of equal activation bytes, each segment's last
      results kept), the one with the lowest estimated peak per tile: the
      step's peak of live bytes, measured on a copy of @main, over the
      `tiles` it is spread on, plus the code each recomputed op's vertex
      adds to a tile (CostModel::vertexCodeBytes); nothing when keeping
      everything is lowest (on many tiles code outweighs activations);
    - `none`: the user's checkpoints only (nothing without them).

    Assumes: @main's forward ops before its backward ones. Guarantees: no
    backward op reads a forward value that is not a checkpoint, a weight, an
    input or a constant.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none, checkpoint-every-layer, stage-inputs or auto">,
    Option<"targetName", "target", "std::string", "\"ipu2\"",
           "the IPU whose code sizes auto counts">,
    Option<"tiles", "tiles", "int64_t", "1472",
           "tiles the step is spread over (auto's per-tile estimate)">,
  ];
  let statistics = [
    Statistic<"numRecomputed", "recomputed-ops", "Forward ops computed again">,
    Statistic<"numCheckpoints", "checkpoints", "Forward values kept">,
  ];
}

def GraphPrecision : Pass<"graph-precision", "::mlir::ModuleOp"> {
  let summary = "Run @main in fp16 (PopTorch's model.half()) and choose the partials type";
  let description = [{
    `precision=fp16.16` or `fp16.32`: every f32 tensor of @main becomes f16
    -- the weights' storage (their values rounded to nearest), constants,
    every op's result -- while @main's signature stays f32: inputs are cast
    to f16 on entry and results back to f32 on return, so a user's data and
    the training labels stay f32. Run before graph-autodiff, the backward
    pass is fp16 too; graph-optimizer-update then updates each fp16 weight
    in fp32 and rounds it back (stochastically with its
    `stochastic-rounding`). `fp32` converts nothing.

    The second number is the partials type (PopTorch's setPartialsType):
    the type matmuls and convolutions of 16-bit floats, forward and
    backward, add their partial sums in. Sums (reductions, means, a
    normalisation's statistics, a softmax's denominator) add in f32
    whatever it is, as Poplar's reductions of fp16 do. The pass records it on the module
    as `graph.partials_type` (f32 or f16), which convert-graph-to-linalg
    reads; `partials-type` (float or half) sets it for any precision, and
    for a model already in fp16 (precision fp32). Without the attribute,
    16-bit contractions add in f32, Poplar's default.

    Assumes: @main of one block. Guarantees: with fp16.*, no f32 tensor in
    @main but its arguments and the casts back to f32 before the return.
  }];
  let options = [
    Option<"precision", "precision", "std::string", "\"fp32\"",
           "fp32, fp16.32 (fp16 storage, f32 partials) or fp16.16 (fp16 storage "
           "and partials)">,
    Option<"partialsType", "partials-type", "std::string", "\"\"",
           "float or half: the partials type, overriding the precision's">,
  ];
}

def GraphLossScaling : Pass<"graph-loss-scaling", "::mlir::ModuleOp"> {
  let summary = "Scale the loss's gradient so fp16 gradients do not underflow";
  let description = [{
    Creates the f32 scalar global `optimizer.loss_scale` and marks @main
    with `graph.loss_scale` (it and the mode): graph-autodiff then seeds the
    backward pass with the scale instead of 1, so every gradient is the
    scale times the true one, and graph-optimizer-update divides them by it
    (in fp32) before anything else reads them.

    - `scale=S`: a static scale, a hyperparameter the runtime may change
      without a recompile.
    - `scale=auto` (PopART's automatic loss scaling, starting at 1): each
      weight update counts the gradients' elements above 1/8 of fp16's
      largest value; when more than 1e-7 of them are, the scale halves,
      otherwise it doubles (at most 2^15: the backward pass starts from the
      scale, which an fp16 loss must hold). An update whose gradients hold an
      inf or a NaN is skipped -- every weight and optimizer state keeps its
      value -- and counted in `optimizer.skipped_updates`, and the scale
      halves. Both are state the program updates and tessera-run reports.
  }];
  let options = [
    Option<"scale", "scale", "std::string", "\"\"",
           "a positive number, or auto (nothing when empty)">,
  ];
}

def GraphReplicate : Pass<"graph-replicate", "::mlir::ModuleOp"> {
  let summary = "Make @main one replica of a data-parallel program";
  let description = [{
    With `replicas=R` above 1, R copies of the program run on R sets of
    IPUs, each with its own slice of every batch (PopTorch's
    replicationFactor). This pass makes them one:

    - A training step's gradients (the results `graph-autodiff` marks
      `graph.gradient_of`) are summed over the replicas by
      `graph.cross_replica_sum` before the optimizer reads them, and with
      `reduction=mean` (PopTorch's default
      accumulationAndReplicationReductionType) divided by R: R replicas of
      micro-batch B then take the step one replica takes with batch R x B.
      One sum per placement (stage and IPU) covers all of its gradients:
      one merged all-reduce, whose ring pays its syncs once.
    - Random numbers differ per replica: each `graph.random_uniform` and
      `graph.stochastic_round` present (dropout, random ops) draws from the
      seed plus the replica's index, the i64 scalar global `replica.index`
      (marked `graph.replica_index`), which the runtime sets in each
      replica. Stochastic rounding that `graph-optimizer-update` adds later
      (weight updates) keeps the shared seed, so that replicas round their
      weights alike and stay equal.

    With `accumulate=G` > 1 the gradients are left alone: the optimizer
    sums the accumulated ones once per weight update (graph-optimizer-update
    with `replicas=R`), one all-reduce per update instead of G.

    Run after graph-autodiff and graph-recompute (a recomputed dropout must
    draw what the forward drew) and before graph-optimizer-update. With R =
    1 the pass changes nothing.
  }];
  let options = [
    Option<"replicas", "replicas", "int64_t", "1", "replicas of the program (>= 1)">,
    Option<"reduction", "reduction", "std::string", "\"mean\"",
           "how gradients combine over replicas: mean or sum">,
    Option<"accumulate", "accumulate", "int64_t", "1",
           "micro-batches per weight update; above 1 the optimizer sums the "
           "accumulated gradients instead">,
  ];
}

def GraphExternalizeState : Pass<"graph-externalize-state", "::mlir::ModuleOp"> {
  let summary = "Thread mutable globals through @main as arguments and results";
  let description = [{
    Lowering and the runtime see a pure function: every mutable global read
    by @main becomes an argument marked `graph.state = "<name>"` (its
    initial value stays in the global, which the argument names), and the
    value its last `ml_program.global_store` writes becomes a result marked
    `graph.state_update = "<name>"`. The runtime keeps such arguments
    resident on the device between runs and copies each update back into its
    argument after every run, as XLA aliases a donated input with an output.

    Assumes: at most one store per global, after every load of it.
    Guarantees: @main reads no mutable global and contains no store.
  }];
  let dependentDialects = ["::mlir::ml_program::MLProgramDialect"];
}

#endif // TESSERA_DIALECT_GRAPH_TRANSFORMS_PASSES_TD
