#pragma once
// What a parameter server's request costs by what it wakes: the prices
// `twinps calibrate` derives from the ps's CPU and sleeps per one-float
// pull, with one caller and two at once, and with one caller pausing
// between calls (PsService.per_request_when_awake_us and
// per_request_by_idle in sim/scenario.proto).
//
// A thread that sleeps between requests is woken for each. A request that
// finds the ps working (another caller's request in hand) is taken without
// a sleep and costs less; one that comes after a long pause costs more than
// one that comes at once, because the longer a core sleeps the deeper it
// goes (and on a virtual machine a halted virtual CPU wakes through the
// hypervisor) and the colder the caches are that the request refills.
#include <optional>
#include <vector>

#include "sim/cost_curve.h"

namespace twinps::cli {

// A ps's CPU (us) and sleeps (voluntary context switches) per call, and the
// wall time between one caller's calls (us; with several callers, between
// calls of any).
struct PsPerCall {
  double ps_us = 0, sleeps = 0, period_us = 0;
};

// The fixed price of a request that finds the ps awake. With one caller
// every request finds it asleep; with two, some find it serving the
// other's, take no sleep and cost less. The share that woke it is the
// sleeps per call with two callers over those with one; the rest cost what
// solves
//   two.ps = woke * one.ps + (1 - woke) * awake.
// Nothing when more than 90 % of requests woke it anyway (too few found it
// awake to price them). `woke_share` receives the share.
std::optional<double> awake_price_us(const PsPerCall& one, const PsPerCall& two, double* woke_share);

// The fixed price of a request by how long the ps had been idle (us, an
// IntervalCost curve): from one caller's calls, the first back to back and
// the rest with growing pauses. The ps idles for a call's period less its
// own CPU for the call; a request there costs `per_request_us` (the price
// measured back to back) plus what the ps spent beyond the back-to-back
// call. Prices that fall with a longer idle are pooled (noise), intervals
// no longer than an earlier point's dropped. Empty for fewer than two
// calls' measurements.
sim::CostCurve idle_price_curve(const std::vector<PsPerCall>& paced, double per_request_us);

}  // namespace twinps::cli
