#include "tools/tune/profile_median.h"

#include <algorithm>
#include <cmath>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include "tools/tune/calibration.h"

namespace twinps::cli {
namespace {

namespace pb = google::protobuf;

// Merges the same message of every profile into `out` (a copy of the first).
class MedianMerge {
 public:
  explicit MedianMerge(std::size_t profiles) : profiles_(profiles) {}

  Status merge(pb::Message& out, const std::vector<const pb::Message*>& in, const std::string& path);

 private:
  Status field(pb::Message& out, const std::vector<const pb::Message*>& in, const pb::FieldDescriptor& f,
               const std::string& path);
  Status repeated(pb::Message& out, const std::vector<const pb::Message*>& in, const pb::FieldDescriptor& f,
                  const std::string& path);
  // A price: a double field's value (element `index` of a repeated one).
  static double number(const pb::Message& m, const pb::FieldDescriptor& f, int index);
  static void set_number(pb::Message& m, const pb::FieldDescriptor& f, int index, double v);
  // Whether a value that is not a price (string, enum, flag, integer) is the same in both.
  static bool same_value(const pb::Message& a, const pb::Message& b, const pb::FieldDescriptor& f, int index);
  static bool is_number(const pb::FieldDescriptor& f);
  Status differs(std::size_t i, const std::string& path, const std::string& what) const {
    return absl::InvalidArgumentError("profile " + std::to_string(i + 1) + " of " + std::to_string(profiles_) +
                                      ": " + path + ": " + what + " (profiles to merge must come from the same "
                                      "calibration method and settings)");
  }

  std::size_t profiles_;
};

// Prices and probes are doubles; integers are settings (threads, hosts per
// rack), which must agree as strings, enums and flags do.
bool MedianMerge::is_number(const pb::FieldDescriptor& f) { return f.cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE; }

double MedianMerge::number(const pb::Message& m, const pb::FieldDescriptor& f, int index) {
  const pb::Reflection& r = *m.GetReflection();
  return f.is_repeated() ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f);
}

void MedianMerge::set_number(pb::Message& m, const pb::FieldDescriptor& f, int index, double v) {
  const pb::Reflection& r = *m.GetReflection();
  if (f.is_repeated()) {
    r.SetRepeatedDouble(&m, &f, index, v);
  } else {
    r.SetDouble(&m, &f, v);
  }
}

bool MedianMerge::same_value(const pb::Message& a, const pb::Message& b, const pb::FieldDescriptor& f, int index) {
  auto text = [&](const pb::Message& m) {
    std::string out;
    pb::TextFormat::PrintFieldValueToString(m, &f, f.is_repeated() ? index : -1, &out);
    return out;
  };
  return text(a) == text(b);
}

Status MedianMerge::merge(pb::Message& out, const std::vector<const pb::Message*>& in, const std::string& path) {
  const pb::Descriptor& d = *out.GetDescriptor();
  for (int k = 0; k < d.field_count(); ++k) {
    const pb::FieldDescriptor& f = *d.field(k);
    const std::string here = path.empty() ? f.name() : path + "." + f.name();
    TWINPS_RETURN_IF_ERROR(f.is_repeated() ? repeated(out, in, f, here) : field(out, in, f, here));
  }
  return absl::OkStatus();
}

Status MedianMerge::field(pb::Message& out, const std::vector<const pb::Message*>& in, const pb::FieldDescriptor& f,
                          const std::string& path) {
  const bool present = in[0]->GetReflection()->HasField(*in[0], &f);
  bool any = present;
  for (std::size_t i = 1; i < in.size(); ++i) {
    const bool here_too = in[i]->GetReflection()->HasField(*in[i], &f);
    any |= here_too;
    // A price left unset is its default (a fit that came out 0 in one
    // calibration of three); a price with no default is not priced when
    // unset (per_request_when_awake_us: too few requests found the ps
    // awake), and a median of it and prices would make one up. Anything
    // else must be set in all or none.
    if (here_too != present && !(is_number(f) && f.has_default_value()))
      return differs(i, path, present ? "not set, where the first profile sets it" : "set, where the first profile is not");
  }
  if (!any) return absl::OkStatus();
  if (f.cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
    std::vector<const pb::Message*> sub;
    for (const pb::Message* m : in) sub.push_back(&m->GetReflection()->GetMessage(*m, &f));
    return merge(*out.GetReflection()->MutableMessage(&out, &f), sub, path);
  }
  if (!is_number(f)) {
    for (std::size_t i = 1; i < in.size(); ++i)
      if (!same_value(*in[0], *in[i], f, 0)) return differs(i, path, "a different value");
    return absl::OkStatus();
  }
  std::vector<double> values;
  for (const pb::Message* m : in) values.push_back(number(*m, f, 0));
  set_number(out, f, 0, median(values));
  return absl::OkStatus();
}

// Element by element. A curve's points must be at the same sizes: a median
// of prices at different sizes prices no size.
Status MedianMerge::repeated(pb::Message& out, const std::vector<const pb::Message*>& in, const pb::FieldDescriptor& f,
                             const std::string& path) {
  const int n = in[0]->GetReflection()->FieldSize(*in[0], &f);
  for (std::size_t i = 1; i < in.size(); ++i)
    if (const int other = in[i]->GetReflection()->FieldSize(*in[i], &f); other != n)
      return differs(i, path, std::to_string(other) + " entries, where the first profile has " + std::to_string(n));
  for (int j = 0; j < n; ++j) {
    const std::string here = path + "[" + std::to_string(j) + "]";
    if (f.cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      std::vector<const pb::Message*> sub;
      for (const pb::Message* m : in) sub.push_back(&m->GetReflection()->GetRepeatedMessage(*m, &f, j));
      if (sub[0]->GetDescriptor() == scenario::BytesCost::descriptor())
        for (std::size_t i = 1; i < sub.size(); ++i)
          if (static_cast<const scenario::BytesCost*>(sub[i])->bytes() !=
              static_cast<const scenario::BytesCost*>(sub[0])->bytes())
            return differs(i, here + ".bytes", "a point at another size");
      TWINPS_RETURN_IF_ERROR(merge(*out.GetReflection()->MutableRepeatedMessage(&out, &f, j), sub, here));
      continue;
    }
    if (!is_number(f)) {
      for (std::size_t i = 1; i < in.size(); ++i)
        if (!same_value(*in[0], *in[i], f, j)) return differs(i, here, "a different value");
      continue;
    }
    std::vector<double> values;
    for (const pb::Message* m : in) values.push_back(number(*m, f, j));
    set_number(out, f, j, median(values));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<scenario::CostProfile> median_profile(const std::vector<scenario::CostProfile>& profiles) {
  if (profiles.empty()) return absl::InvalidArgumentError("no profile to take the median of");
  std::vector<const pb::Message*> in;
  std::vector<scenario::CostProfile> comparable = profiles;
  for (auto& p : comparable) p.clear_measured_on();  // free text, not a price
  for (const auto& p : comparable) in.push_back(&p);
  scenario::CostProfile out = comparable[0];
  TWINPS_RETURN_IF_ERROR(MedianMerge(profiles.size()).merge(out, in, ""));
  out.set_measured_on("the median of " + std::to_string(profiles.size()) + " calibrations: " +
                      profiles[0].measured_on());
  return out;
}

}  // namespace twinps::cli
