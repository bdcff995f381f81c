//===- TrainConfig.cpp - DeepSpeed-style training configuration -----------===//
//
// Defaults are DeepSpeed's: its Adam is FusedAdam (weight_decay 0,
// adam_w_mode true), its schedulers are deepspeed/runtime/lr_schedules.py
// (WarmupLR: min 0, max 0.001, 1000 steps, "log"; WarmupCosineLR:
// warmup_min_ratio 0, cos_min_ratio 0.0001). Every problem is collected and
// reported at once.
//
//===----------------------------------------------------------------------===//

#include "autopar/Driver/TrainConfig.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;

namespace autopar {
namespace {

/// Reads typed values from JSON objects, collecting errors by key path.
class Reader {
public:
  std::vector<std::string> errors;

  void error(const Twine &path, const Twine &message) {
    errors.push_back((path + ": " + message).str());
  }

  /// Reports keys of `object` (at `path`) not in `known`.
  void checkKeys(const json::Object &object, StringRef path,
                 ArrayRef<StringRef> known) {
    for (const auto &kv : object)
      if (!is_contained(known, StringRef(kv.first)))
        error(join(path, kv.first),
              "unknown key; known here: " + llvm::join(known, ", "));
  }

  static std::string join(StringRef path, StringRef key) {
    return path.empty() ? key.str() : (path + "." + key).str();
  }

  std::optional<double> number(const json::Object &o, StringRef path,
                               StringRef key) {
    const json::Value *v = o.get(key);
    if (!v)
      return std::nullopt;
    if (auto d = v->getAsNumber())
      return *d;
    error(join(path, key), "expected a number");
    return std::nullopt;
  }

  /// An integer, or std::nullopt when absent or "auto".
  std::optional<int64_t> integerOrAuto(const json::Object &o, StringRef path,
                                       StringRef key, bool allowAuto = true) {
    const json::Value *v = o.get(key);
    if (!v)
      return std::nullopt;
    if (allowAuto && v->getAsString() && *v->getAsString() == "auto")
      return std::nullopt;
    if (auto i = v->getAsInteger())
      return *i;
    error(join(path, key), allowAuto ? "expected an integer or \"auto\""
                                     : "expected an integer");
    return std::nullopt;
  }

  std::optional<bool> boolean(const json::Object &o, StringRef path,
                              StringRef key) {
    const json::Value *v = o.get(key);
    if (!v)
      return std::nullopt;
    if (auto b = v->getAsBoolean())
      return *b;
    error(join(path, key), "expected true or false");
    return std::nullopt;
  }

  std::optional<std::string> string(const json::Object &o, StringRef path,
                                    StringRef key) {
    const json::Value *v = o.get(key);
    if (!v)
      return std::nullopt;
    if (auto s = v->getAsString())
      return s->str();
    error(join(path, key), "expected a string");
    return std::nullopt;
  }

  const json::Object *object(const json::Object &o, StringRef path,
                             StringRef key) {
    const json::Value *v = o.get(key);
    if (!v)
      return nullptr;
    if (const json::Object *obj = v->getAsObject())
      return obj;
    error(join(path, key), "expected an object");
    return nullptr;
  }
};

void readOptimizer(Reader &r, const json::Object &o, TrainConfig &c) {
  r.checkKeys(o, "optimizer", {"type", "params"});
  std::string type = r.string(o, "optimizer", "type").value_or("");
  std::string lower = StringRef(type).lower();
  static const json::Object empty;
  const json::Object *params = r.object(o, "optimizer", "params");
  if (!params)
    params = &empty;
  StringRef p = "optimizer.params";
  if (lower == "sgd") {
    c.optimizer = OptimizerKind::SGD;
    r.checkKeys(*params, p,
                {"lr", "momentum", "dampening", "nesterov", "weight_decay"});
    if (auto lr = r.number(*params, p, "lr"))
      c.lr = *lr;
    else
      r.error(Reader::join(p, "lr"), "SGD needs a learning rate");
    c.momentum = r.number(*params, p, "momentum").value_or(0.0);
    c.dampening = r.number(*params, p, "dampening").value_or(0.0);
    c.nesterov = r.boolean(*params, p, "nesterov").value_or(false);
    c.weightDecay = r.number(*params, p, "weight_decay").value_or(0.0);
    if (c.nesterov && (c.momentum <= 0.0 || c.dampening != 0.0))
      r.error(Reader::join(p, "nesterov"),
              "Nesterov momentum needs momentum > 0 and dampening 0 (as "
              "torch.optim.SGD)");
  } else if (lower == "adam" || lower == "adamw") {
    bool isAdam = lower == "adam";
    SmallVector<StringRef> known{"lr",           "betas",           "eps",
                                 "weight_decay", "bias_correction", "amsgrad"};
    if (isAdam)
      known.push_back("adam_w_mode");
    r.checkKeys(*params, p, known);
    // DeepSpeed's "Adam" is AdamW unless adam_w_mode is false.
    bool decoupled =
        isAdam ? r.boolean(*params, p, "adam_w_mode").value_or(true) : true;
    c.optimizer = decoupled ? OptimizerKind::AdamW : OptimizerKind::Adam;
    c.lr = r.number(*params, p, "lr").value_or(1e-3);
    c.eps = r.number(*params, p, "eps").value_or(1e-8);
    c.weightDecay = r.number(*params, p, "weight_decay").value_or(0.0);
    if (const json::Value *betas = params->get("betas")) {
      const json::Array *a = betas->getAsArray();
      if (!a || a->size() != 2 || !(*a)[0].getAsNumber() ||
          !(*a)[1].getAsNumber()) {
        r.error(Reader::join(p, "betas"), "expected two numbers");
      } else {
        c.beta1 = *(*a)[0].getAsNumber();
        c.beta2 = *(*a)[1].getAsNumber();
        if (c.beta1 < 0 || c.beta1 >= 1 || c.beta2 < 0 || c.beta2 >= 1)
          r.error(Reader::join(p, "betas"), "each beta must be in [0, 1)");
      }
    }
    if (!r.boolean(*params, p, "bias_correction").value_or(true))
      r.error(Reader::join(p, "bias_correction"),
              "only bias-corrected Adam (true) is supported");
    if (r.boolean(*params, p, "amsgrad").value_or(false))
      r.error(Reader::join(p, "amsgrad"), "AMSGrad is not supported");
  } else {
    r.error("optimizer.type", "'" + type +
                                  "' is not supported; supported: SGD, Adam, "
                                  "AdamW");
    return;
  }
  if (c.lr <= 0)
    r.error("optimizer.params.lr", "must be positive");
  if (c.weightDecay < 0)
    r.error("optimizer.params.weight_decay", "must not be negative");
}

void readScheduler(Reader &r, const json::Object &o, TrainConfig &c) {
  r.checkKeys(o, "scheduler", {"type", "params"});
  std::string type = r.string(o, "scheduler", "type").value_or("");
  static const json::Object empty;
  const json::Object *params = r.object(o, "scheduler", "params");
  if (!params)
    params = &empty;
  StringRef p = "scheduler.params";
  auto warmupType = [&] {
    std::string t = r.string(*params, p, "warmup_type").value_or("log");
    if (t == "linear")
      c.warmupType = WarmupType::Linear;
    else if (t != "log")
      r.error(Reader::join(p, "warmup_type"),
              "'" + t + "' is not supported; supported: log, linear");
  };
  auto lastIteration = [&] {
    if (r.integerOrAuto(*params, p, "last_batch_iteration", false)
            .value_or(-1) != -1)
      r.error(Reader::join(p, "last_batch_iteration"),
              "only -1 (start from the beginning) is supported; resume from "
              "a checkpoint instead");
  };
  auto totalSteps = [&] {
    if (auto t = r.integerOrAuto(*params, p, "total_num_steps", false))
      c.totalSteps = *t;
    else
      r.error(Reader::join(p, "total_num_steps"),
              type + " needs the total number of steps");
  };
  if (type == "WarmupLR" || type == "WarmupDecayLR") {
    bool decay = type == "WarmupDecayLR";
    SmallVector<StringRef> known{"warmup_min_lr", "warmup_max_lr",
                                 "warmup_num_steps", "warmup_type",
                                 "last_batch_iteration"};
    if (decay)
      known.push_back("total_num_steps");
    r.checkKeys(*params, p, known);
    c.schedule = decay ? LrSchedule::WarmupDecay : LrSchedule::Warmup;
    c.warmupMinLr = r.number(*params, p, "warmup_min_lr").value_or(0.0);
    c.warmupMaxLr = r.number(*params, p, "warmup_max_lr").value_or(0.001);
    c.warmupSteps =
        r.integerOrAuto(*params, p, "warmup_num_steps", false).value_or(1000);
    warmupType();
    lastIteration();
    if (decay)
      totalSteps();
  } else if (type == "WarmupCosineLR") {
    r.checkKeys(*params, p,
                {"total_num_steps", "warmup_min_ratio", "warmup_num_steps",
                 "cos_min_ratio", "warmup_type", "last_batch_iteration"});
    c.schedule = LrSchedule::WarmupCosine;
    totalSteps();
    c.warmupMinRatio = r.number(*params, p, "warmup_min_ratio").value_or(0.0);
    c.cosMinRatio = r.number(*params, p, "cos_min_ratio").value_or(0.0001);
    c.warmupSteps =
        r.integerOrAuto(*params, p, "warmup_num_steps", false).value_or(1000);
    warmupType();
    lastIteration();
  } else {
    r.error("scheduler.type", "'" + type +
                                  "' is not supported; supported: WarmupLR, "
                                  "WarmupDecayLR, WarmupCosineLR");
    return;
  }
  if (c.warmupSteps < 0)
    r.error(Reader::join(p, "warmup_num_steps"), "must not be negative");
  if (c.schedule != LrSchedule::Warmup &&
      c.totalSteps <= std::max<int64_t>(2, c.warmupSteps))
    r.error(Reader::join(p, "total_num_steps"),
            formatv("must be greater than warmup_num_steps ({0})",
                    std::max<int64_t>(2, c.warmupSteps)));
}

} // namespace

TrainConfig defaultTrainConfig() { return TrainConfig(); }

Expected<TrainConfig> parseTrainConfig(StringRef text, StringRef path) {
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return createStringError(
        inconvertibleErrorCode(),
        path + ": not valid JSON: " + toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return createStringError(inconvertibleErrorCode(),
                             path + ": expected a JSON object");
  Reader r;
  TrainConfig c;
  r.checkKeys(*root, "",
              {"train_batch_size", "train_micro_batch_size_per_gpu",
               "gradient_accumulation_steps", "gradient_clipping", "optimizer",
               "scheduler", "zero_optimization", "bf16", "fp16",
               "activation_checkpointing", "steps_per_print",
               "wall_clock_breakdown"});
  c.trainBatchSize = r.integerOrAuto(*root, "", "train_batch_size");
  c.microBatchSize =
      r.integerOrAuto(*root, "", "train_micro_batch_size_per_gpu");
  c.accumulationSteps =
      r.integerOrAuto(*root, "", "gradient_accumulation_steps");
  for (auto [key, value] :
       {std::pair{"train_batch_size", c.trainBatchSize},
        {"train_micro_batch_size_per_gpu", c.microBatchSize},
        {"gradient_accumulation_steps", c.accumulationSteps}})
    if (value && *value <= 0)
      r.error(key, "must be positive");
  if (c.trainBatchSize && c.microBatchSize && c.accumulationSteps &&
      *c.trainBatchSize % (*c.microBatchSize * *c.accumulationSteps) != 0)
    r.error("train_batch_size",
            formatv("{0} is not a multiple of train_micro_batch_size_per_gpu "
                    "({1}) x gradient_accumulation_steps ({2})",
                    *c.trainBatchSize, *c.microBatchSize,
                    *c.accumulationSteps));
  if (auto clip = r.number(*root, "", "gradient_clipping")) {
    if (*clip < 0)
      r.error("gradient_clipping", "must not be negative");
    c.gradientClipping = *clip;
  }
  if (const json::Object *o = r.object(*root, "", "optimizer"))
    readOptimizer(r, *o, c);
  if (const json::Object *o = r.object(*root, "", "scheduler"))
    readScheduler(r, *o, c);
  if (const json::Object *o = r.object(*root, "", "zero_optimization")) {
    r.checkKeys(*o, "zero_optimization", {"stage"});
    c.zeroStage = r.integerOrAuto(*o, "zero_optimization", "stage");
    if (c.zeroStage && (*c.zeroStage < 0 || *c.zeroStage > 3))
      r.error("zero_optimization.stage", "must be 0, 1, 2, 3 or \"auto\"");
  }
  for (StringRef precision : {"bf16", "fp16"}) {
    const json::Object *o = r.object(*root, "", precision);
    if (!o)
      continue;
    if (precision == "bf16")
      r.checkKeys(*o, "bf16", {"enabled"});
    else
      r.checkKeys(*o, "fp16",
                  {"enabled", "loss_scale", "initial_scale_power",
                   "loss_scale_window", "hysteresis", "consecutive_hysteresis",
                   "min_loss_scale"});
    if (!r.boolean(*o, precision, "enabled").value_or(false))
      continue;
    if (!c.precision.empty()) {
      r.error("fp16.enabled", "bf16 and fp16 cannot both be enabled");
      continue;
    }
    c.precision = precision.str();
    if (precision != "fp16")
      continue;
    // DeepSpeed's fp16 section: loss_scale 0 is dynamic scaling.
    LossScaling &ls = c.lossScaling;
    StringRef p = "fp16";
    ls.staticScale = r.number(*o, p, "loss_scale").value_or(0.0);
    ls.initialScalePower =
        r.integerOrAuto(*o, p, "initial_scale_power", false).value_or(16);
    ls.window =
        r.integerOrAuto(*o, p, "loss_scale_window", false).value_or(1000);
    ls.hysteresis = r.integerOrAuto(*o, p, "hysteresis", false).value_or(2);
    ls.consecutiveHysteresis =
        r.boolean(*o, p, "consecutive_hysteresis").value_or(false);
    ls.minScale = r.number(*o, p, "min_loss_scale").value_or(1.0);
    if (ls.staticScale < 0)
      r.error("fp16.loss_scale", "must be 0 (dynamic) or positive");
    if (ls.initialScalePower < 0 || ls.initialScalePower > 60)
      r.error("fp16.initial_scale_power", "must be between 0 and 60");
    if (ls.window < 1)
      r.error("fp16.loss_scale_window", "must be positive");
    if (ls.hysteresis < 1)
      r.error("fp16.hysteresis", "must be positive");
    if (ls.minScale <= 0)
      r.error("fp16.min_loss_scale", "must be positive");
  }
  if (const json::Object *o = r.object(*root, "", "activation_checkpointing")) {
    r.checkKeys(*o, "activation_checkpointing", {"policy"});
    std::string policy =
        r.string(*o, "activation_checkpointing", "policy").value_or("auto");
    if (policy != "auto" && policy != "none" && policy != "selective" &&
        policy != "full")
      r.error("activation_checkpointing.policy",
              "'" + policy + "'; expected auto, none, selective or full");
  }
  if (!r.errors.empty()) {
    std::string message = (path + ":").str();
    for (const std::string &e : r.errors)
      message += "\n  " + e;
    return createStringError(inconvertibleErrorCode(), message);
  }
  return c;
}

Expected<TrainConfig> readTrainConfig(StringRef path) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return createStringError(buffer.getError(),
                             "--train-config " + path + ": " +
                                 buffer.getError().message());
  return parseTrainConfig((*buffer)->getBuffer(), path);
}

static StringRef optimizerName(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  return "";
}

static StringRef scheduleName(LrSchedule s) {
  switch (s) {
  case LrSchedule::Constant:
    return "constant";
  case LrSchedule::Warmup:
    return "warmup";
  case LrSchedule::WarmupDecay:
    return "warmup-decay";
  case LrSchedule::WarmupCosine:
    return "warmup-cosine";
  }
  return "";
}

json::Object TrainConfig::optimizerJson() const {
  json::Object o{{"type", optimizerName(optimizer)},
                 {"lr", lr},
                 {"weight_decay", weightDecay}};
  if (optimizer == OptimizerKind::SGD) {
    o["momentum"] = momentum;
    o["dampening"] = dampening;
    o["nesterov"] = nesterov;
  } else {
    o["betas"] = json::Array{beta1, beta2};
    o["eps"] = eps;
  }
  return o;
}

json::Object TrainConfig::schedulerJson() const {
  json::Object o{{"type", scheduleName(schedule)}};
  if (schedule == LrSchedule::Constant)
    return o;
  o["warmup_num_steps"] = warmupSteps;
  o["warmup_type"] = warmupType == WarmupType::Log ? "log" : "linear";
  if (schedule == LrSchedule::WarmupCosine) {
    o["warmup_min_ratio"] = warmupMinRatio;
    o["cos_min_ratio"] = cosMinRatio;
  } else {
    o["warmup_min_lr"] = warmupMinLr;
    o["warmup_max_lr"] = warmupMaxLr;
  }
  if (schedule != LrSchedule::Warmup)
    o["total_num_steps"] = totalSteps;
  return o;
}

std::string TrainConfig::applyOptimizerOptions() const {
  // %.17g round-trips every double exactly.
  return formatv("optimizer={0} lr={1:e17} momentum={2:e17} dampening={3:e17} "
                 "nesterov={4} weight-decay={5:e17} beta1={6:e17} "
                 "beta2={7:e17} eps={8:e17} clip={9:e17} schedule={10} "
                 "warmup-type={11} warmup-min-lr={12:e17} "
                 "warmup-max-lr={13:e17} warmup-steps={14} total-steps={15} "
                 "warmup-min-ratio={16:e17} cos-min-ratio={17:e17}",
                 optimizerName(optimizer), lr, momentum, dampening,
                 nesterov ? "true" : "false", weightDecay, beta1, beta2, eps,
                 gradientClipping, scheduleName(schedule),
                 warmupType == WarmupType::Log ? "log" : "linear", warmupMinLr,
                 warmupMaxLr, warmupSteps, totalSteps, warmupMinRatio,
                 cosMinRatio)
      .str();
}

} // namespace autopar
