//===- FrameworkExport.h - The plan for other frameworks --------*- C++ -*-===//
//
// autopar-compile's --emit-megatron, --emit-deepspeed and --emit-torchtitan
// (docs/interfaces.md): the chosen plan (the one the report names) written as
// the settings of Megatron-LM (command-line arguments), DeepSpeed (a
// ds_config.json) and torchtitan (its job config TOML), so that a plan can be
// run by those frameworks. Every name written is the framework's own,
// documented one; what a framework cannot express is said in the file's
// comments and as a warning.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_FRAMEWORKEXPORT_H
#define AUTOPAR_DRIVER_FRAMEWORKEXPORT_H

#include "autopar/Planner/Planner.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace autopar {

/// One framework's settings for a plan.
struct FrameworkExport {
  /// The file's contents.
  std::string text;
  /// What the framework cannot express exactly, one sentence each (without
  /// the flag's name): autopar-compile prints them as warnings.
  std::vector<std::string> warnings;
};

/// Megatron-LM's command-line arguments for `result.best`, as a shell script
/// fragment: leading `#` comment lines (the plan, the world size and the data
/// parallelism Megatron-LM derives from it, world / (tp x pp)), then one
/// argument per line, each ending in ` \`: --tensor-model-parallel-size,
/// --pipeline-model-parallel-size, --micro-batch-size, --global-batch-size,
/// --recompute-granularity (with --recompute-method uniform
/// --recompute-num-layers 1 for full recomputation),
/// --use-distributed-optimizer (ZeRO stage >= 1), --bf16 or --fp16. Dimensions
/// plans do not have yet (virtual pipeline stages, sequence and context
/// parallelism) are not written.
FrameworkExport exportMegatron(const PlanResult &result,
                               const PlanRequest &request);

/// DeepSpeed's ds_config.json for `result.best`: train_batch_size,
/// train_micro_batch_size_per_gpu, gradient_accumulation_steps,
/// zero_optimization.stage, bf16 / fp16 {"enabled": true} per the precision,
/// activation_checkpointing when the plan recomputes (number_checkpoints: the
/// model layers of the most loaded stage), and a "_comment" that names
/// the plan. `userConfig`, the user's --train-config (DeepSpeed's
/// schema), contributes its optimizer, scheduler and gradient_clipping, and
/// its fp16 loss scaling when the plan is fp16; null when none was given.
/// DeepSpeed's config has no tensor or pipeline degree: a plan with tp or
/// pp > 1 is still written, with a warning, and the "_comment" gives the
/// Megatron-DeepSpeed arguments that carry them.
FrameworkExport exportDeepSpeed(const PlanResult &result,
                                const PlanRequest &request,
                                const llvm::json::Object *userConfig);

/// torchtitan's job config TOML for `result.best` (the names of
/// torchtitan/config/job_config.py): [parallelism] with the data-parallel
/// replicate and shard degrees (ZeRO-0 is replication, DDP; ZeRO 1 to 3 are
/// FSDP2 sharding, which keeps parameters gathered from forward to backward,
/// fsdp_reshard_after_forward = "never", for ZeRO 1 and 2, and reshards them
/// for ZeRO-3; ZeRO-0 with tp or pp > 1 is written as ZeRO 1 and 2 are, with
/// a warning, as torchtitan's DDP does not combine with them), tensor,
/// pipeline and context parallel degrees and the pipeline micro-batch;
/// [training] local_batch_size, global_batch_size and mixed_precision_param
/// (bfloat16, else float32: fp16 warns); [activation_checkpoint] mode.
FrameworkExport exportTorchtitan(const PlanResult &result,
                                 const PlanRequest &request);

/// Where autopar-compile writes each export: a path, "-" for stdout, or ""
/// for none.
struct FrameworkExportPaths {
  std::string megatron, deepspeed, torchtitan;
  /// The user's --train-config, read again for exportDeepSpeed; "" for none.
  std::string trainConfigPath;

  bool any() const {
    return !megatron.empty() || !deepspeed.empty() || !torchtitan.empty();
  }
};

/// Writes each export `paths` asks for, announcing each file written to
/// llvm::outs() and passing each warning, prefixed with its flag
/// (`--emit-deepspeed: ...`), to `warn`. Errors name the flag and the path.
llvm::Error
writeFrameworkExports(const FrameworkExportPaths &paths,
                      const PlanResult &result, const PlanRequest &request,
                      llvm::function_ref<void(const llvm::Twine &)> warn);

} // namespace autopar

#endif // AUTOPAR_DRIVER_FRAMEWORKEXPORT_H
