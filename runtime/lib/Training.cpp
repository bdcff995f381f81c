//===- Training.cpp - autopar-run --train on one CPU rank
//------------------===//

#include "autopar/runtime/Training.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Npy.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace autopar::runtime {
namespace {

std::string formatShape(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The data inputs' files, checked against the program's inputs.
struct Dataset {
  std::vector<size_t> inputs;
  std::vector<NpyArray> arrays;
  int64_t samples = 0;
};

Dataset loadData(const Session &session, const std::string &dir,
                 int64_t globalBatch) {
  Dataset data;
  std::vector<std::string> problems;
  const std::vector<ArgumentDesc> &args = session.getArguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgumentDesc &arg = args[i];
    if (arg.kind != ArgumentKind::Input)
      continue;
    std::string path = dir + "/" + arg.name + ".npy";
    NpyArray array;
    try {
      array = readNpy(path);
    } catch (const Error &e) {
      problems.push_back(e.what());
      continue;
    }
    Shape sample(arg.shape.begin() + (arg.shape.empty() ? 0 : 1),
                 arg.shape.end());
    Shape found(array.shape.begin() + (array.shape.empty() ? 0 : 1),
                array.shape.end());
    if (array.dtype != npyStorageDType(arg.dtype))
      problems.push_back(path + ": dtype " +
                         std::string(dtypeName(array.dtype)) + ", expected " +
                         std::string(dtypeName(arg.dtype)));
    else if (array.shape.empty() || found != sample)
      problems.push_back(path + ": shape " + formatShape(array.shape) +
                         ", expected [samples" + (sample.empty() ? "" : ", ") +
                         formatShape(sample).substr(1));
    else if (array.shape[0] < globalBatch)
      problems.push_back(path + ": " + std::to_string(array.shape[0]) +
                         " samples, fewer than one batch (" +
                         std::to_string(globalBatch) + ")");
    else {
      data.samples = data.arrays.empty()
                         ? array.shape[0]
                         : std::min(data.samples, array.shape[0]);
      data.inputs.push_back(i);
      data.arrays.push_back(std::move(array));
    }
  }
  if (!problems.empty()) {
    std::string message = "--data " + dir + ": " +
                          std::to_string(problems.size()) +
                          " problem(s) with the training data:";
    for (const std::string &p : problems)
      message += "\n  " + p;
    throw Error(message);
  }
  return data;
}

size_t findIndex(const Session &session, ArgumentKind kind,
                 const std::string &name, const std::string &what) {
  if (std::optional<size_t> i = session.findArgument(kind, name))
    return *i;
  throw Error("the training artifact has no " + what + " '" + name +
              "' (recompile it with autopar-compile --mode train)");
}

} // namespace

void runTraining(Session &session, Communicator &comm,
                 const TrainOptions &options) {
  const Manifest &manifest = session.getManifest();
  if (!manifest.training)
    throw Error("--train: " + manifest.path +
                " is an inference artifact; compile the model with "
                "autopar-compile --mode train");
  if (manifest.worldSize != 1 || session.device())
    throw Error("--train: training runs on one CPU rank so far");
  const TrainingDesc &training = *manifest.training;
  const std::vector<ArgumentDesc> &args = session.getArguments();

  size_t loss = findIndex(session, ArgumentKind::Output, training.loss, "loss");
  size_t lr = findIndex(session, ArgumentKind::Metric, "lr", "metric");
  size_t gradNorm =
      findIndex(session, ArgumentKind::Metric, "grad_norm", "metric");
  size_t step = findIndex(session, ArgumentKind::Step, "step", "step");
  std::vector<std::pair<size_t, size_t>> updates;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != ArgumentKind::Update)
      continue;
    std::optional<size_t> target =
        session.findArgument(ArgumentKind::Parameter, args[i].updates);
    if (!target)
      target =
          session.findArgument(ArgumentKind::OptimizerState, args[i].updates);
    if (!target)
      throw Error(manifest.path + ": update '" + args[i].name + "' updates '" +
                  args[i].updates +
                  "', which is no parameter or optimizer state");
    updates.push_back({i, *target});
  }

  int64_t batch = training.globalBatch;
  Dataset data = loadData(session, options.dataDir, batch);
  int64_t batchesPerEpoch = data.samples / batch;
  std::printf("autopar-run: training to step %lld on %lld samples (%lld "
              "batches of %lld per epoch)\n",
              static_cast<long long>(options.steps),
              static_cast<long long>(data.samples),
              static_cast<long long>(batchesPerEpoch),
              static_cast<long long>(batch));

  std::ofstream metrics;
  if (options.metricsPath) {
    metrics.open(*options.metricsPath, std::ios::app);
    if (!metrics)
      throw Error("--metrics " + *options.metricsPath + ": cannot open");
  }
  using Clock = std::chrono::steady_clock;
  for (int64_t s = 0; s < options.steps; ++s) {
    int64_t first = (s % batchesPerEpoch) * batch;
    for (size_t k = 0; k < data.inputs.size(); ++k) {
      const ArgumentDesc &arg = args[data.inputs[k]];
      size_t rowBytes = dtypeSize(arg.dtype);
      for (size_t d = 1; d < arg.shape.size(); ++d)
        rowBytes *= static_cast<size_t>(arg.shape[d]);
      std::memcpy(session.argumentData(data.inputs[k]),
                  static_cast<const char *>(data.arrays[k].data.data()) +
                      first * rowBytes,
                  rowBytes * batch);
    }
    *static_cast<int64_t *>(session.argumentData(step)) = s + 1;
    Clock::time_point start = Clock::now();
    session.runStep(comm);
    double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    float lossValue = *static_cast<const float *>(session.argumentData(loss));
    float lrValue = *static_cast<const float *>(session.argumentData(lr));
    float normValue =
        *static_cast<const float *>(session.argumentData(gradNorm));
    double samplesPerSecond = batch / seconds;
    std::ostringstream record;
    record.precision(9);
    record << "{\"step\": " << s + 1 << ", \"loss\": " << lossValue
           << ", \"lr\": " << lrValue << ", \"grad_norm\": " << normValue
           << ", \"step_time_s\": " << seconds
           << ", \"samples_per_s\": " << samplesPerSecond;
    if (training.tokensPerSample > 0)
      record << ", \"tokens_per_s\": "
             << samplesPerSecond * training.tokensPerSample;
    record << "}";
    if (metrics.is_open())
      metrics << record.str() << "\n" << std::flush;
    std::printf("step %lld/%lld  loss %.6f  lr %.3e  grad-norm %.4f  %.2f ms  "
                "%.1f samples/s\n",
                static_cast<long long>(s + 1),
                static_cast<long long>(options.steps), lossValue, lrValue,
                normValue, seconds * 1e3, samplesPerSecond);
    std::fflush(stdout);
    if (!std::isfinite(lossValue) || !std::isfinite(normValue))
      throw Error("step " + std::to_string(s + 1) + ": the " +
                  (std::isfinite(lossValue) ? "gradient norm" : "loss") +
                  " is not finite; lower the learning rate or clip the "
                  "gradients (gradient_clipping)");
    for (auto [update, target] : updates)
      session.swapArguments(update, target);
  }

  if (options.outputsDir) {
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == ArgumentKind::Parameter)
        writeNpy(*options.outputsDir + "/" + args[i].name + ".npy",
                 args[i].dtype, args[i].shape, session.argumentData(i));
    std::printf("autopar-run: wrote the trained parameters to %s\n",
                options.outputsDir->c_str());
  }
}

} // namespace autopar::runtime
