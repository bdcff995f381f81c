//===- FrameworkExport.cpp - The plan as other frameworks' settings -------===//
//
// The names written are the frameworks' own, checked against their sources:
// Megatron-LM's megatron/training/arguments.py, DeepSpeed's
// docs/_pages/config-json.md and torchtitan's torchtitan/config/job_config.py
// (the TOML job config of torchtitan 0.2; the same field names are its
// Python configs' since). test/Tools/autopar-compile-framework-names.test
// keeps the lists of documented names that every name written must be in.
//
//===----------------------------------------------------------------------===//

#include "autopar/Driver/FrameworkExport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace llvm;

namespace autopar {
namespace {

bool isTraining(const PlanRequest &request) {
  return request.mode == PlanMode::Training;
}

/// The plan in one line, as the plan table gives it.
std::string planSummary(const PlanResult &result, const PlanRequest &request) {
  const PlanCandidate &b = result.best;
  return formatv("dp={0} tp={1} pp={2}, zero {3}, micro-batch {4} x {5} per "
                 "replica (global batch {6}), recompute {7}, schedule {8}{11}, "
                 "precision {9}{10}",
                 b.dp, b.tp, b.pp, b.zeroStage, b.microBatchSize,
                 b.numMicroBatches, result.globalBatch,
                 recomputeName(b.recompute), scheduleName(b.schedule),
                 precisionName(request.precision),
                 b.sequenceParallel ? ", sequence parallel" : "",
                 b.virtualStages > 1
                     ? " interleaved over " + std::to_string(b.virtualStages) +
                           " virtual stages per stage"
                     : std::string())
      .str();
}

/// Where the plan comes from: the model, the cluster and its ranks, the mode.
std::string planOrigin(const PlanRequest &request) {
  return formatv("the autopar plan of {0} on {1} ({2} ranks, --mode {3})",
                 request.modelName, request.cluster.name,
                 request.cluster.worldSize(),
                 isTraining(request) ? "train" : "infer")
      .str();
}

/// The warning every export of an inference plan carries.
void warnIfInference(const PlanRequest &request, FrameworkExport &out) {
  if (!isTraining(request))
    out.warnings.push_back(
        "the plan is an inference plan (--mode infer): its mesh and batches "
        "are written as a training run's; plan with --mode train to train");
}

/// The model layers (the stage's `layers`: a repeated block of segments is
/// one layer; else its segments) of the most loaded pipeline stage: one
/// activation checkpoint each under recomputation.
std::optional<int64_t> checkpointsPerStage(const PlanCandidate &plan) {
  std::optional<int64_t> most;
  for (const StagePlan &stage : plan.stages) {
    int64_t count = stage.lastSegment - stage.firstSegment + 1;
    auto [first, last] = StringRef(stage.layers).split('-');
    int64_t firstLayer, lastLayer;
    if (to_integer(first, firstLayer) && to_integer(last, lastLayer))
      count = lastLayer - firstLayer + 1;
    most = std::max(most.value_or(0), count);
  }
  return most;
}

/// The model's layers (one past the last stage's last layer), or none when
/// the stages name no layers (a model without a repeated block), with a
/// warning in `out` that `framework`'s `setting` must then be set by hand.
std::optional<int64_t> modelLayers(const PlanCandidate &plan,
                                   StringRef framework, StringRef setting,
                                   FrameworkExport &out) {
  std::optional<int64_t> layers;
  for (const StagePlan &stage : plan.stages) {
    int64_t last;
    if (to_integer(StringRef(stage.layers).split('-').second, last))
      layers = std::max(layers.value_or(0), last + 1);
  }
  if (!layers)
    out.warnings.push_back((framework +
                            " needs the layers per virtual pipeline stage, and "
                            "the plan's stages name no model layers: set " +
                            setting + " by hand")
                               .str());
  return layers;
}

/// The layers each virtual stage gets in a framework that gives them all the
/// same number: the model's layers over pp x v, rounded up; a warning in
/// `out` where they do not divide (the plan's split by time differs from
/// the framework's then).
std::optional<int64_t> layersPerVirtualStage(const PlanCandidate &plan,
                                             StringRef framework,
                                             FrameworkExport &out) {
  std::optional<int64_t> layers = modelLayers(
      plan, framework, "--num-layers-per-virtual-pipeline-stage", out);
  int64_t chunks = plan.pp * plan.virtualStages;
  if (!layers)
    return std::nullopt;
  if (*layers % chunks != 0)
    out.warnings.push_back(
        formatv("{0} gives every virtual pipeline stage the same number of "
                "layers, and the model's {1} do not divide into pp {2} x "
                "{3} virtual stages: {4} each is written",
                framework, *layers, plan.pp, plan.virtualStages,
                (*layers + chunks - 1) / chunks)
            .str());
  return (*layers + chunks - 1) / chunks;
}

/// The shortest decimal that reads back as `d` (0.95, where json::Value
/// prints 0.94999999999999996).
std::string shortestDouble(double d) {
  if (!std::isfinite(d))
    return "null"; // JSON has no NaN or infinity (json::Value's choice too)
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, d);
    if (std::strtod(text, nullptr) == d)
      break;
  }
  return text;
}

/// `value` as JSON text, as json::Value prints it (object keys sorted,
/// integral numbers as integers) but with fractions at their shortest.
void writeJson(json::OStream &out, const json::Value &value) {
  if (const json::Object *object = value.getAsObject()) {
    SmallVector<StringRef> keys;
    for (const auto &kv : *object)
      keys.push_back(kv.first);
    llvm::sort(keys);
    out.object([&] {
      for (StringRef key : keys) {
        out.attributeBegin(key);
        writeJson(out, *object->get(key));
        out.attributeEnd();
      }
    });
  } else if (const json::Array *array = value.getAsArray()) {
    out.array([&] {
      for (const json::Value &element : *array)
        writeJson(out, element);
    });
  } else if (value.kind() == json::Value::Number && !value.getAsInteger()) {
    out.rawValue(shortestDouble(*value.getAsNumber()));
  } else {
    out.value(value);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Megatron-LM
//===----------------------------------------------------------------------===//

FrameworkExport exportMegatron(const PlanResult &result,
                               const PlanRequest &request) {
  const PlanCandidate &b = result.best;
  FrameworkExport out;
  warnIfInference(request, out);
  std::string text;
  raw_string_ostream os(text);
  int64_t world = request.cluster.worldSize();
  // Comments lead: a comment between continued lines would end the command.
  os << "# Megatron-LM arguments for " << planOrigin(request) << ":\n"
     << "#   " << planSummary(result, request) << ".\n"
     << "# World size " << world
     << ": Megatron-LM derives the data parallelism, " << world << " / (tp "
     << b.tp << " x pp " << b.pp << ") = dp " << world / (b.tp * b.pp)
     << "; launch " << world << " ranks.\n";
  if (b.pp > 1 && b.schedule == PipelineSchedule::GPipe)
    os << "# Megatron-LM runs its pipeline 1F1B, not the plan's GPipe "
          "schedule: the same bubble, fewer micro-batches in flight.\n";
  if (b.zeroStage >= 2) {
    std::string strategy =
        b.zeroStage == 2 ? "optim_grads" : "optim_grads_params";
    std::string sharded =
        b.zeroStage == 2 ? "gradients" : "gradients and parameters";
    std::string note =
        "Megatron-LM's distributed optimizer shards the optimizer state "
        "(ZeRO-1) and reduce-scatters the gradients, but keeps every rank's "
        "whole " +
        sharded + ", which the plan's ZeRO-" + std::to_string(b.zeroStage) +
        " shards: Megatron-FSDP (--use-megatron-fsdp "
        "--data-parallel-sharding-strategy " +
        strategy + ") shards them too";
    os << "# " << note << ".\n";
    out.warnings.push_back(note);
  }
  if (request.precision == Precision::TF32 ||
      request.precision == Precision::FP32)
    os << "# Precision " << precisionName(request.precision)
       << ": neither --bf16 nor --fp16.\n";

  auto arg = [&](StringRef name, std::optional<int64_t> value = std::nullopt) {
    os << name;
    if (value)
      os << " " << *value;
    os << " \\\n";
  };
  arg("--tensor-model-parallel-size", b.tp);
  arg("--pipeline-model-parallel-size", b.pp);
  // Virtual stages: Megatron-LM's interleaved 1F1B, from the layers each
  // virtual stage holds. Plans have no context parallelism yet:
  // --context-parallel-size comes with it. A plan priced with its tp
  // collectives overlapped (autopar-compile --tp-comm-overlap) asks the run
  // for that overlap, which Megatron-LM performs only with sequence
  // parallelism.
  if (b.pp > 1 && b.virtualStages > 1)
    if (std::optional<int64_t> perChunk =
            layersPerVirtualStage(b, "Megatron-LM", out))
      arg("--num-layers-per-virtual-pipeline-stage", *perChunk);
  if (b.tp > 1 && (b.sequenceParallel || request.overlapTensorParallelComm))
    arg("--sequence-parallel");
  if (b.tp > 1 && request.overlapTensorParallelComm)
    arg("--tp-comm-overlap");
  arg("--micro-batch-size", b.microBatchSize);
  arg("--global-batch-size", result.globalBatch);
  if (b.recompute == Recompute::Full) {
    arg("--recompute-granularity full");
    arg("--recompute-method uniform");
    arg("--recompute-num-layers", 1);
  } else if (b.recompute == Recompute::Selective) {
    arg("--recompute-granularity selective");
  }
  if (b.zeroStage >= 1)
    arg("--use-distributed-optimizer");
  if (request.precision == Precision::BF16)
    arg("--bf16");
  else if (request.precision == Precision::FP16)
    arg("--fp16");
  out.text = std::move(text);
  return out;
}

//===----------------------------------------------------------------------===//
// DeepSpeed
//===----------------------------------------------------------------------===//

FrameworkExport exportDeepSpeed(const PlanResult &result,
                                const PlanRequest &request,
                                const json::Object *userConfig) {
  const PlanCandidate &b = result.best;
  FrameworkExport out;
  warnIfInference(request, out);
  std::string comment = "DeepSpeed config for " + planOrigin(request) + ": " +
                        planSummary(result, request) + ".";
  if (b.pp > 1 && b.virtualStages > 1) {
    std::string note = formatv("DeepSpeed's pipeline engine has no "
                               "interleaved schedule: the plan's {0} virtual "
                               "stages per stage run as one (a {1}x larger "
                               "bubble)",
                               b.virtualStages, b.virtualStages)
                           .str();
    comment += " " + note + ".";
    out.warnings.push_back(note);
  }
  if (b.tp > 1 || b.pp > 1) {
    std::string megatron = formatv("--tensor-model-parallel-size {0} "
                                   "--pipeline-model-parallel-size {1}",
                                   b.tp, b.pp)
                               .str();
    comment += " DeepSpeed's config has no tensor or pipeline parallel "
               "degree: Megatron-DeepSpeed takes them as arguments, " +
               megatron + " (autopar-compile --emit-megatron).";
    out.warnings.push_back(
        formatv("DeepSpeed's config has no tensor or pipeline parallel "
                "degree: the plan's tp={0} pp={1} must come from "
                "Megatron-DeepSpeed's arguments ({2}; --emit-megatron writes "
                "them)",
                b.tp, b.pp, megatron)
            .str());
  }

  json::Object config{
      {"_comment", comment},
      {"train_batch_size", result.globalBatch},
      {"train_micro_batch_size_per_gpu", b.microBatchSize},
      {"gradient_accumulation_steps", b.numMicroBatches},
      {"zero_optimization", json::Object{{"stage", b.zeroStage}}},
  };
  if (request.precision == Precision::BF16) {
    config["bf16"] = json::Object{{"enabled", true}};
  } else if (request.precision == Precision::FP16) {
    // The user's loss scaling goes with it (the keys of DeepSpeed's fp16).
    json::Object fp16;
    if (userConfig)
      if (const json::Object *given = userConfig->getObject("fp16"))
        fp16 = *given;
    fp16["enabled"] = true;
    config["fp16"] = std::move(fp16);
  }
  if (b.recompute != Recompute::None) {
    std::optional<int64_t> checkpoints = checkpointsPerStage(b);
    config["activation_checkpointing"] = json::Object{
        {"partition_activations", false},
        {"cpu_checkpointing", false},
        {"contiguous_memory_optimization", false},
        {"number_checkpoints",
         checkpoints ? json::Value(*checkpoints) : json::Value(nullptr)}};
  }
  // The training hyperparameters the user gave, as given (DeepSpeed's
  // schema is --train-config's).
  if (userConfig)
    for (StringRef key : {"optimizer", "scheduler", "gradient_clipping"})
      if (const json::Value *value = userConfig->get(key))
        config[key] = *value;
  {
    raw_string_ostream os(out.text);
    json::OStream json(os, 2);
    writeJson(json, json::Value(std::move(config)));
  }
  out.text += "\n";
  return out;
}

//===----------------------------------------------------------------------===//
// torchtitan
//===----------------------------------------------------------------------===//

FrameworkExport exportTorchtitan(const PlanResult &result,
                                 const PlanRequest &request) {
  const PlanCandidate &b = result.best;
  FrameworkExport out;
  warnIfInference(request, out);
  std::string text;
  raw_string_ostream os(text);
  os << "# torchtitan job config for " << planOrigin(request) << ":\n"
     << "#   " << planSummary(result, request) << ".\n"
     << "# Sections of torchtitan's TOML job config "
        "(torchtitan/config/job_config.py):\n"
     << "# merge them into a train config that names the model, optimizer "
        "and data.\n";

  // Data parallelism: ZeRO-0 replicates (DDP); torchtitan shards with FSDP2,
  // which is ZeRO-3: without resharding after the forward it keeps the
  // parameters gathered until the backward, ZeRO-2's memory and traffic.
  int64_t replicate = 1, shard = 1;
  std::string reshard;
  os << "\n[parallelism]\n";
  if (b.dp > 1 && b.zeroStage == 0 && b.tp == 1 && b.pp == 1) {
    replicate = b.dp;
    os << "# ZeRO-0: replicated parameters (DDP).\n";
  } else if (b.dp > 1 && b.zeroStage == 0) {
    shard = b.dp;
    reshard = "never";
    os << "# ZeRO-0: torchtitan's DDP (data_parallel_replicate_degree) does "
          "not combine with\n# tensor or pipeline parallelism, so FSDP2 "
          "shards instead, keeping parameters gathered\n# from forward to "
          "backward (ZeRO-2's memory, no more than the plan's).\n";
    out.warnings.push_back(
        "torchtitan's DDP (data_parallel_replicate_degree) does not combine "
        "with tensor or pipeline parallelism: the plan's ZeRO-0 data "
        "parallelism is written as FSDP2 sharding without resharding after "
        "the forward (data_parallel_shard_degree, ZeRO-2-like)");
  } else if (b.dp > 1 && b.zeroStage <= 2) {
    shard = b.dp;
    reshard = "never";
    os << "# ZeRO-" << b.zeroStage
       << ": torchtitan's FSDP2 (data_parallel_shard_degree) shards "
          "parameters, gradients and\n# optimizer state like ZeRO-3; not "
          "resharding after the forward keeps the parameters\n# gathered "
          "until the backward: ZeRO-2's memory and traffic, the closest to "
          "ZeRO-1 and 2.\n";
  } else if (b.dp > 1) {
    shard = b.dp;
    reshard = "always";
    os << "# ZeRO-3: torchtitan's FSDP2 (data_parallel_shard_degree), "
          "resharding parameters after\n# each forward.\n";
  }
  os << "data_parallel_replicate_degree = " << replicate << "\n"
     << "data_parallel_shard_degree = " << shard << "\n";
  if (!reshard.empty())
    os << "fsdp_reshard_after_forward = \"" << reshard << "\"\n";
  // torchtitan's tensor-parallel plans shard the norms along the sequence
  // (SequenceParallel) with no setting to turn it off.
  if (b.tp > 1 && !b.sequenceParallel) {
    os << "# Sequence parallelism: torchtitan's tensor parallelism always "
          "splits the norms along\n# the sequence; this plan keeps them "
          "whole (--sequence-parallel on prices it so).\n";
    out.warnings.push_back(
        "torchtitan's tensor parallelism always runs the norms sequence-"
        "parallel; the plan was priced without (--sequence-parallel on "
        "prices it as torchtitan runs it)");
  }
  os << "tensor_parallel_degree = " << b.tp << "\n"
     << "pipeline_parallel_degree = " << b.pp << "\n";
  // The micro-batches of a pipeline are local_batch_size / its micro-batch
  // size; without one, they are gradient accumulation steps, global_batch_size
  // / (local_batch_size x dp).
  int64_t localBatch = b.microBatchSize;
  if (b.pp > 1) {
    localBatch = b.microBatchSize * b.numMicroBatches;
    os << "pipeline_parallel_schedule = \""
       << (b.schedule == PipelineSchedule::GPipe ? "GPipe"
           : b.virtualStages > 1                 ? "Interleaved1F1B"
                                                 : "1F1B")
       << "\"\n"
       << "pipeline_parallel_microbatch_size = " << b.microBatchSize << "\n";
    // torchtitan makes ceil(units / N) virtual stages of N layers, the
    // embedding and the output layer counting one each, and needs them to be
    // a multiple of pp: the N giving the plan's count, else the nearest.
    if (b.virtualStages > 1) {
      if (std::optional<int64_t> layers = modelLayers(
              b, "torchtitan", "pipeline_parallel_layers_per_stage", out)) {
        int64_t units = *layers + 2, wanted = b.pp * b.virtualStages;
        int64_t best = 0, made = 0;
        for (int64_t n = 1; n <= units; ++n) {
          int64_t count = (units + n - 1) / n;
          if (count % b.pp == 0 &&
              (!best || std::abs(count - wanted) < std::abs(made - wanted))) {
            best = n;
            made = count;
          }
        }
        if (best) {
          os << "# " << made << " virtual stages of " << best << ": the "
             << *layers
             << " layers with the embedding and the output layer (one "
                "each).\n"
             << "pipeline_parallel_layers_per_stage = " << best << "\n";
          if (made != wanted)
            out.warnings.push_back(
                formatv("torchtitan cuts the model's {0} layers, the "
                        "embedding and the output layer into virtual stages "
                        "of equal layers: {1} per stage makes {2}, not the "
                        "plan's {3} (pp {4} x {5})",
                        *layers, best, made, wanted, b.pp, b.virtualStages)
                    .str());
        } else {
          out.warnings.push_back(
              formatv("torchtitan cannot cut the model's {0} layers into a "
                      "multiple of pp {1} virtual stages: set "
                      "pipeline_parallel_layers_per_stage by hand",
                      *layers, b.pp)
                  .str());
        }
      }
    }
  }
  os << "context_parallel_degree = 1\n";

  os << "\n[training]\n"
     << "local_batch_size = " << localBatch << "\n"
     << "global_batch_size = " << result.globalBatch << "\n";
  if (request.precision == Precision::BF16) {
    os << "mixed_precision_param = \"bfloat16\"\n";
  } else {
    if (request.precision == Precision::FP16) {
      os << "# torchtitan's mixed precision is bfloat16 or float32: the plan's "
            "fp16 runs float32.\n";
      out.warnings.push_back("torchtitan's mixed_precision_param is bfloat16 "
                             "or float32: the plan's fp16 is written as "
                             "float32");
    }
    os << "mixed_precision_param = \"float32\"\n";
  }

  os << "\n[activation_checkpoint]\n"
     << "mode = \"" << recomputeName(b.recompute) << "\"\n";
  if (b.recompute == Recompute::Selective)
    os << "# autopar's selective recomputation keeps the matmul outputs and "
          "recomputes attention's\n# inner activations (Megatron-LM's): "
          "torchtitan's op-level selective checkpointing.\n"
       << "selective_ac_option = \"op\"\n";
  out.text = std::move(text);
  return out;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

static Error writeExport(StringRef flag, StringRef path,
                         const FrameworkExport &exported, StringRef what,
                         function_ref<void(const Twine &)> warn) {
  for (const std::string &warning : exported.warnings)
    warn(flag + ": " + warning);
  if (path == "-") {
    outs() << exported.text;
    outs().flush();
    return Error::success();
  }
  std::error_code ec;
  raw_fd_ostream file(path, ec);
  if (!ec) {
    file << exported.text;
    file.close();
    if (file.has_error()) {
      ec = file.error();
      file.clear_error();
    }
  }
  if (ec)
    return createStringError(ec, flag + " " + path + ": " + ec.message());
  outs() << "wrote " << path << " (" << what << ")\n";
  return Error::success();
}

Error writeFrameworkExports(const FrameworkExportPaths &paths,
                            const PlanResult &result,
                            const PlanRequest &request,
                            function_ref<void(const Twine &)> warn) {
  if (!paths.megatron.empty())
    if (Error e = writeExport("--emit-megatron", paths.megatron,
                              exportMegatron(result, request),
                              "Megatron-LM arguments", warn))
      return e;
  if (!paths.deepspeed.empty()) {
    // The user's config was read and checked before planning: its sections
    // are carried over as written.
    std::optional<json::Value> userConfig;
    if (!paths.trainConfigPath.empty()) {
      auto buffer = MemoryBuffer::getFile(paths.trainConfigPath);
      if (!buffer)
        return createStringError(buffer.getError(),
                                 "--emit-deepspeed: --train-config " +
                                     paths.trainConfigPath + ": " +
                                     buffer.getError().message());
      Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
      if (!parsed)
        return createStringError(inconvertibleErrorCode(),
                                 "--emit-deepspeed: --train-config " +
                                     paths.trainConfigPath + ": " +
                                     toString(parsed.takeError()));
      userConfig = std::move(*parsed);
    }
    if (Error e = writeExport(
            "--emit-deepspeed", paths.deepspeed,
            exportDeepSpeed(result, request,
                            userConfig ? userConfig->getAsObject() : nullptr),
            "DeepSpeed config", warn))
      return e;
  }
  if (!paths.torchtitan.empty())
    if (Error e = writeExport("--emit-torchtitan", paths.torchtitan,
                              exportTorchtitan(result, request),
                              "torchtitan config", warn))
      return e;
  return Error::success();
}

} // namespace autopar
