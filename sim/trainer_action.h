#pragma once
// What a scenario's `train` action trains, built the same way in both modes:
// the simulator (sim/simulation.cc) and `twinps sim --real`
// (tools/real_scenario.cc) both run it through ScenarioProgram::train.
#include <memory>

#include "core/checkpoint/checkpoint_manager.h"
#include "core/checkpoint/storage.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "sim/scenario_program.h"

namespace twinps::sim {

// The tutorial: its built-in spec with the scenario's settings, trained on
// its generated records. Data and initial values are drawn from `seed`. The
// setup's registry is the caller's to set.
StatusOr<ScenarioProgram::TrainerSetup> tutorial_setup(const scenario::Tutorial& t, int ps, std::uint64_t seed);

// The checkpoints a scenario's training saves (tutorial.checkpoint_every_epoch,
// or checkpoints.every_epoch with a spec), kept in `storage`, which outlives
// the coordinator: a restarted program restores the newest, and so does a ps
// recovery in place (ps_failure RESTORE/ROLLBACK). Null: none are saved.
std::unique_ptr<CheckpointManager> scenario_checkpoints(const scenario::Scenario& sc, CheckpointStorage& storage);

}  // namespace twinps::sim
