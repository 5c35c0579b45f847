// Push-then-pull against ps-lite (ZMQ), store-only server: each worker pushes
// one key per server (N floats each) and pulls it back, sequentially, for
// WINDOW seconds after WARMUP; prints pairs/s and goodput (one way) per worker.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include "ps/ps.h"
using namespace ps;
static std::unordered_map<Key, std::vector<float>> store;

void Handler(const KVMeta& meta, const KVPairs<float>& data, KVServer<float>* server) {
  size_t per = data.keys.size() ? data.vals.size() / data.keys.size() : 0;
  if (meta.push) {
    for (size_t i = 0; i < data.keys.size(); ++i) {
      auto& v = store[data.keys[i]];
      v.assign(data.vals.data() + i * per, data.vals.data() + (i + 1) * per);
    }
    server->Response(meta, KVPairs<float>());
  } else {
    KVPairs<float> res;
    res.keys = data.keys;
    for (auto k : data.keys) {
      auto& v = store[k];
      res.vals.append(SArray<float>(v.data(), v.size(), false));  // shares the stored memory
      res.lens.push_back(static_cast<int>(v.size()));
    }
    server->Response(meta, res);
  }
}

int main() {
  const int n = std::atoi(std::getenv("BENCH_VALUES"));
  const double window = std::atof(std::getenv("BENCH_WINDOW"));
  const double warmup = std::atof(std::getenv("BENCH_WARMUP"));
  Start(0);
  KVServer<float>* server = nullptr;
  if (IsServer()) {
    server = new KVServer<float>(0);
    server->set_request_handle(Handler);
  }
  if (IsWorker()) {
    KVWorker<float> kv(0, 0);
    const auto& ranges = Postoffice::Get()->GetServerKeyRanges();
    std::vector<Key> keys;
    for (const auto& r : ranges) keys.push_back(r.begin() + MyRank());
    std::vector<float> vals(static_cast<size_t>(n) * keys.size(), 1.0f);
    std::vector<int> lens(keys.size(), n);
    std::vector<float> got;
    std::vector<int> got_lens;
    using C = std::chrono::steady_clock;
    auto t0 = C::now();
    long pairs = 0;
    bool measuring = false;
    C::time_point m0;
    while (true) {
      double el = std::chrono::duration<double>(C::now() - t0).count();
      if (!measuring && el >= warmup) { measuring = true; m0 = C::now(); pairs = 0; }
      if (measuring && std::chrono::duration<double>(C::now() - m0).count() >= window) break;
      kv.Wait(kv.Push(keys, vals, lens));
      kv.Wait(kv.Pull(keys, &got, &got_lens));
      ++pairs;
    }
    double secs = std::chrono::duration<double>(C::now() - m0).count();
    double bytes = double(pairs) * n * 4.0 * keys.size();
    std::printf("worker %d: pairs/s %.1f goodput GB/s %.3f\n", MyRank(), pairs / secs, bytes / secs / 1e9);
    std::fflush(stdout);
  }
  Finalize(0, true);
  delete server;
  return 0;
}
