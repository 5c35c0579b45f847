#include "net/convert.h"

#include <set>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include "net/frame.h"
#include "tests/net/net_test_util.h"

namespace twinps::net {
namespace {

using testing::expect_eq;
using testing::ramp;

// How tensors travel in a round trip.
enum class Mode { kInBand, kAttachments, kAllAttachments };

template <typename Core, typename Wire>
Core round_trip(const Core& in, Mode mode) {
  Wire wire;
  std::size_t threshold = mode == Mode::kAllAttachments ? 1 : AttachmentWriter::kDefaultThreshold;
  AttachmentWriter writer(threshold);
  if constexpr (requires { to_proto(in, &wire, &writer); }) {
    to_proto(in, &wire, mode == Mode::kInBand ? nullptr : &writer);
  } else {
    to_proto(in, &wire);
  }
  // Through bytes, as on the wire.
  Wire parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  std::string blob = flatten(writer);
  ContiguousAttachments reader(blob);
  Core out;
  Status st;
  if constexpr (requires { from_proto(parsed, &out, &reader); }) {
    st = from_proto(parsed, &out, mode == Mode::kInBand ? nullptr : &reader);
  } else {
    st = from_proto(parsed, &out);
  }
  EXPECT_TRUE(st.ok()) << st;
  if (mode == Mode::kInBand) {
    EXPECT_EQ(writer.total(), 0u);
  }
  return out;
}

class ConvertRoundTripTest : public ::testing::TestWithParam<Mode> {};

TEST_P(ConvertRoundTripTest, EveryRequest) {
  for (const auto& req : testing::sample_requests()) {
    SCOPED_TRACE(request_name(req));
    expect_eq(req, round_trip<Request, wire::Request>(req, GetParam()));
  }
}

TEST_P(ConvertRoundTripTest, EveryResponse) {
  for (const auto& resp : testing::sample_responses()) {
    SCOPED_TRACE(resp.index());
    expect_eq(resp, round_trip<Response, wire::Response>(resp, GetParam()));
  }
}

TEST_P(ConvertRoundTripTest, LargeTensors) {
  // 4 MiB each: above any threshold, so out of band when attachments are on.
  for (const auto& req : testing::sample_requests(1 << 17)) {
    SCOPED_TRACE(request_name(req));
    expect_eq(req, round_trip<Request, wire::Request>(req, GetParam()));
  }
  for (const auto& resp : testing::sample_responses(1 << 17)) expect_eq(resp, round_trip<Response, wire::Response>(resp, GetParam()));
}

TEST_P(ConvertRoundTripTest, EmptyTensorsKeepTheirShape) {
  for (auto [r, c] : {std::pair{0, 0}, std::pair{0, 5}, std::pair{5, 0}, std::pair{1, 1}}) {
    Matrix m = ramp(r, c);
    Matrix out = round_trip<Matrix, wire::Tensor>(m, GetParam());
    EXPECT_EQ(out.rows(), r);
    EXPECT_EQ(out.cols(), c);
    expect_eq(m, out);
  }
}

TEST_P(ConvertRoundTripTest, SpecialFloatsSurviveBitForBit) {
  Matrix m(1, 4);
  m << std::numeric_limits<float>::infinity(), -0.0f, std::numeric_limits<float>::denorm_min(),
      std::numeric_limits<float>::quiet_NaN();
  Matrix out = round_trip<Matrix, wire::Tensor>(m, GetParam());
  EXPECT_EQ(std::memcmp(m.data(), out.data(), sizeof(float) * 4), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, ConvertRoundTripTest,
                         ::testing::Values(Mode::kInBand, Mode::kAttachments, Mode::kAllAttachments),
                         [](const auto& info) {
                           switch (info.param) {
                             case Mode::kInBand: return std::string("InBand");
                             case Mode::kAttachments: return std::string("Attachments");
                             case Mode::kAllAttachments: return std::string("AllAttachments");
                           }
                           return std::string("?");
                         });

TEST(ConvertTest, ValuesOfEveryKind) {
  for (const auto& v : testing::sample_values()) {
    SCOPED_TRACE(v.index());
    expect_eq(v, round_trip<Value, wire::Value>(v, Mode::kInBand));
  }
}

TEST(ConvertTest, TaskIdsOfEveryJob) {
  for (Job j : kAllJobs) {
    TaskId t{j, 3};
    EXPECT_EQ((round_trip<TaskId, wire::TaskId>(t, Mode::kInBand)), t);
  }
}

TEST(ConvertTest, StatusKeepsCodeMessageAndEveryPayload) {
  Status s = with_error_kind(with_failed_task(absl::AbortedError("fenced \xff bytes"), TaskId::ps(3)), ErrorKind::kFenced);
  s.SetPayload("type.example/custom", absl::Cord(std::string("\0\1\2", 3)));
  wire::Status w;
  to_proto(s, &w);
  wire::Status parsed;
  ASSERT_TRUE(parsed.ParseFromString(w.SerializeAsString()));
  Status out;
  ASSERT_TRUE(from_proto(parsed, &out).ok());
  EXPECT_EQ(out, s);  // absl::Status equality compares payloads too
  EXPECT_EQ(failed_task(out), TaskId::ps(3));
  EXPECT_EQ(error_kind(out), ErrorKind::kFenced);

  wire::Status ok;
  Status out_ok = absl::InternalError("x");
  ASSERT_TRUE(from_proto(ok, &out_ok).ok());
  EXPECT_TRUE(out_ok.ok());
}

// Every field of every wire message reachable from Request and Response is
// set by some sample: the mapping is 1:1, no field is forgotten.
void collect_set_fields(const google::protobuf::Message& m, std::set<std::string>* out) {
  const auto* refl = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  refl->ListFields(m, &fields);
  for (const auto* f : fields) {
    out->insert(f->full_name());
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < refl->FieldSize(m, f); ++i) collect_set_fields(refl->GetRepeatedMessage(m, f, i), out);
    } else {
      collect_set_fields(refl->GetMessage(m, f), out);
    }
  }
}
void collect_all_fields(const google::protobuf::Descriptor* d, std::set<std::string>* out,
                        std::set<const google::protobuf::Descriptor*>* seen) {
  if (!seen->insert(d).second) return;
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    out->insert(f->full_name());
    if (f->message_type()) collect_all_fields(f->message_type(), out, seen);
  }
}

TEST(ConvertTest, SamplesCoverEveryWireField) {
  std::set<std::string> set_fields;
  for (Mode mode : {Mode::kInBand, Mode::kAllAttachments}) {
    for (const auto& r : testing::sample_requests()) {
      AttachmentWriter writer(1);
      wire::Request w;
      to_proto(r, &w, mode == Mode::kInBand ? nullptr : &writer);
      collect_set_fields(w, &set_fields);
    }
    for (const auto& r : testing::sample_responses()) {
      AttachmentWriter writer(1);
      wire::Response w;
      to_proto(r, &w, mode == Mode::kInBand ? nullptr : &writer);
      collect_set_fields(w, &set_fields);
    }
  }
  std::set<std::string> all_fields;
  std::set<const google::protobuf::Descriptor*> seen;
  collect_all_fields(wire::Request::descriptor(), &all_fields, &seen);
  collect_all_fields(wire::Response::descriptor(), &all_fields, &seen);
  for (const auto& f : all_fields) EXPECT_TRUE(set_fields.count(f)) << f << " is never set by to_proto";
}

// ------------------------------------------------------------------ malformed input


template <typename Wire, typename Core>
std::string rejection(const Wire& w, Core* out, const AttachmentReader* a = nullptr) {
  Status st;
  if constexpr (std::is_same_v<Core, Request> || std::is_same_v<Core, Response> || std::is_same_v<Core, Matrix> ||
                std::is_same_v<Core, Value> || std::is_same_v<Core, ShardState>) {
    st = from_proto(w, out, a);
  } else {
    st = from_proto(w, out);
  }
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st;
  return std::string(st.message());
}

TEST(ConvertMalformedTest, TensorByteLengthMustMatchItsShape) {
  wire::Tensor t;
  t.set_rows(2);
  t.set_cols(2);
  t.set_data(std::string(12, 'x'));
  Matrix m;
  EXPECT_EQ(rejection(t, &m), "data: is 12 bytes, expected 16 for 2x2 float32");
  t.set_data(std::string(20, 'x'));
  rejection(t, &m);
  t.clear_data();
  rejection(t, &m);
}

TEST(ConvertMalformedTest, NegativeOrAbsurdDimensions) {
  Matrix m;
  wire::Tensor t;
  t.set_rows(-1);
  t.set_cols(0);
  EXPECT_NE(rejection(t, &m).find("rows: negative dimension -1"), std::string::npos);
  t.set_rows(0);
  t.set_cols(-4);
  rejection(t, &m);
  // Would overflow rows*cols*4 if multiplied blindly; no data needed to be rejected.
  t.set_rows(std::int64_t{1} << 40);
  t.set_cols(std::int64_t{1} << 40);
  rejection(t, &m);
  t.set_rows(std::int64_t{1} << 33);
  t.set_cols(0);
  rejection(t, &m);

  wire::ShardSpec spec;
  spec.set_rows(-3);
  ShardSpec s;
  rejection(spec, &s);
  wire::VariableLayout layout;
  layout.add_shape(4);
  layout.add_shape(-1);
  VariableLayout l;
  EXPECT_NE(rejection(layout, &l).find("shape[1]"), std::string::npos);
  layout.clear_shape();
  layout.add_shape(std::int64_t{1} << 40);
  layout.add_shape(std::int64_t{1} << 40);
  rejection(layout, &l);
  wire::ShardPlacement placement;
  placement.set_row_offset(-1);
  ShardPlacement p;
  rejection(placement, &p);
}

TEST(ConvertMalformedTest, AttachmentsMustLieInsideAttachmentData) {
  wire::Tensor t;
  t.set_rows(2);
  t.set_cols(2);
  t.set_attachment_offset(8);
  std::string blob(20, 'x');
  ContiguousAttachments reader(blob);
  Matrix m;
  rejection(t, &m, &reader);  // [8, 24) outside 20 bytes
  t.set_attachment_offset(4);
  EXPECT_TRUE(from_proto(t, &m, &reader).ok());
  t.set_attachment_offset(~std::uint64_t{0} - 3);  // offset + size overflows
  rejection(t, &m, &reader);
  t.set_attachment_offset(0);
  EXPECT_NE(rejection(t, &m).find("carries none"), std::string::npos);  // no attachments at all
  t.set_data(std::string(16, 'x'));
  rejection(t, &m, &reader);  // both in-band and out of band
}

TEST(ConvertMalformedTest, TensorsCannotShareAttachmentBytes) {
  // Two 16-byte tensors over one 16-byte attachment: decoding them would
  // allocate twice what the message carries (a thousand would allocate a
  // thousand times), so the second is refused before it is allocated.
  wire::Request w;
  for (int i = 0; i < 2; ++i) {
    auto* u = w.mutable_push()->add_updates();
    u->set_op(wire::Update::APPLY_GRADIENT);
    u->mutable_values()->set_rows(2);
    u->mutable_values()->set_cols(2);
    u->mutable_values()->set_attachment_offset(0);
  }
  std::string blob(16, 'x');
  ContiguousAttachments reader(blob);
  Request r;
  EXPECT_NE(rejection(w, &r, &reader).find("updates[1].values.attachment_offset: the tensors claim more"),
            std::string::npos);
}

TEST(ConvertMalformedTest, UnknownEnumValues) {
  Request r;
  {
    wire::Request w;
    w.mutable_push()->add_updates()->set_op(static_cast<wire::Update::Op>(9));
    EXPECT_EQ(rejection(w, &r), "Request.push.updates[0].op: unknown update op 9");
  }
  {
    wire::Request w;
    w.mutable_create_shards()->mutable_optimizer()->set_kind(static_cast<wire::OptimizerConfig::Kind>(7));
    rejection(w, &r);
  }
  {
    wire::Request w;
    w.mutable_create_shards()->mutable_optimizer()->mutable_learning_rate()->set_kind(
        static_cast<wire::LearningRateSchedule::Kind>(-2));
    rejection(w, &r);
  }
  {
    wire::Request w;
    w.mutable_create_shards()->add_shards()->mutable_spec()->set_kind(static_cast<wire::VariableKind>(3));
    EXPECT_NE(rejection(w, &r).find("create_shards.shards[0].spec.kind"), std::string::npos);
  }
  {
    wire::Request w;
    w.mutable_setup_worker()->add_variables()->set_kind(static_cast<wire::VariableKind>(100));
    rejection(w, &r);
  }
  Response resp;
  wire::Response w;
  w.mutable_health()->mutable_task()->set_job(static_cast<wire::Job>(4));
  rejection(w, &resp);
  w.mutable_health()->mutable_task()->set_job(wire::JOB_PS);
  w.mutable_health()->mutable_task()->set_index(-1);
  rejection(w, &resp);
}

TEST(ConvertMalformedTest, UnsetOneofs) {
  Request r;
  EXPECT_NE(rejection(wire::Request(), &r).find("no request set"), std::string::npos);
  Response resp;
  rejection(wire::Response(), &resp);
  Value v;
  rejection(wire::Value(), &v);
  wire::Request w;
  w.mutable_run_closure()->add_args();
  EXPECT_NE(rejection(w, &r).find("Request.run_closure.args[0].kind"), std::string::npos);
}

TEST(ConvertMalformedTest, BadTensorDeepInsideAMessageNamesItsPath) {
  auto reqs = testing::sample_requests();
  wire::Request w;
  to_proto(reqs[1], &w);  // CreateShards
  w.mutable_create_shards()->mutable_shards(0)->mutable_slots(1)->set_rows(9);
  Request r;
  EXPECT_NE(rejection(w, &r).find("Request.create_shards.shards[0].slots[1].data: is"), std::string::npos);

  wire::Response resp_w;
  to_proto(testing::sample_responses()[2], &resp_w);  // Pull
  resp_w.mutable_pull()->mutable_items(0)->mutable_values()->set_cols(-1);
  Response resp;
  EXPECT_NE(rejection(resp_w, &resp).find("Response.pull.items[0].values.cols"), std::string::npos);
}

TEST(ConvertMalformedTest, PayloadsCoreReadsBackMustParse) {
  auto with_payload = [](std::string type_url, std::string value) {
    wire::Status w;
    w.set_code(static_cast<int>(StatusCode::kAborted));
    auto* p = w.add_payloads();
    p->set_type_url(std::move(type_url));
    p->set_value(std::move(value));
    return w;
  };
  Status out;
  for (const char* bad : {"ps", "ps:", "ps:x", "ps:-1", "pserver:1", "ps:99999999999"})
    EXPECT_EQ(from_proto(with_payload(kFailedTaskPayload, bad), &out).code(), StatusCode::kInvalidArgument) << bad;
  for (const char* bad : {"", "x", "7", "-1", "99999999999"})
    EXPECT_EQ(from_proto(with_payload(kErrorKindPayload, bad), &out).code(), StatusCode::kInvalidArgument) << bad;
  ASSERT_TRUE(from_proto(with_payload(kFailedTaskPayload, "evaluator:12"), &out).ok());
  EXPECT_EQ(failed_task(out), TaskId::evaluator(12));
  ASSERT_TRUE(from_proto(with_payload(kErrorKindPayload, "3"), &out).ok());
  EXPECT_EQ(error_kind(out), ErrorKind::kStaleIncarnation);
  // Payloads of other types pass as they are.
  EXPECT_TRUE(from_proto(with_payload("type.example/anything", "\xff"), &out).ok());
}

TEST(ConvertMalformedTest, UnknownStatusCode) {
  wire::Status w;
  w.set_code(17);
  Status out;
  EXPECT_EQ(from_proto(w, &out).code(), StatusCode::kInvalidArgument);
  w.set_code(-1);
  EXPECT_EQ(from_proto(w, &out).code(), StatusCode::kInvalidArgument);
}

// ------------------------------------------------------------------ frames

// Re-cuts a message into slices of `piece` bytes, as gRPC's reads might.
grpc::ByteBuffer recut(const grpc::ByteBuffer& in, std::size_t piece) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(in.Dump(&slices).ok());
  std::string all;
  for (auto& s : slices) all.append(reinterpret_cast<const char*>(s.begin()), s.size());
  std::vector<grpc::Slice> out;
  for (std::size_t i = 0; i < all.size(); i += piece) out.emplace_back(all.data() + i, std::min(piece, all.size() - i));
  return grpc::ByteBuffer(out.data(), out.size());
}

grpc::ByteBuffer raw(const std::string& bytes) {
  grpc::Slice s(bytes);
  return grpc::ByteBuffer(&s, 1);
}

TEST(FrameTest, RoundTripWithAttachmentsAcrossSlices) {
  for (const auto& req : testing::sample_requests(300)) {
    SCOPED_TRACE(request_name(req));
    auto owner = std::make_shared<Request>(req);
    wire::RpcRequest env;
    env.set_request_id(99);
    AttachmentWriter writer(64);
    to_proto(*owner, env.mutable_request(), &writer);
    std::size_t bytes = 0;
    grpc::ByteBuffer buf = encode_frame(env, writer, owner, &bytes);
    EXPECT_EQ(buf.Length(), bytes);
    for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}, bytes + 1}) {
      grpc::ByteBuffer cut = recut(buf, piece);
      wire::RpcRequest parsed;
      ReceivedFrame frame;
      ASSERT_TRUE(frame.parse(cut, &parsed).ok());
      EXPECT_EQ(parsed.request_id(), 99u);
      EXPECT_EQ(frame.size(), writer.total());
      Request out;
      ASSERT_TRUE(from_proto(parsed.request(), &out, &frame).ok());
      expect_eq(req, out);
    }
    // The frame is an ordinary RpcRequest to any protobuf parser.
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buf.Dump(&slices).ok());
    std::string flat;
    for (auto& s : slices) flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
    wire::RpcRequest plain;
    ASSERT_TRUE(plain.ParseFromString(flat));
    EXPECT_EQ(plain.attachment_data(), flatten(writer));
  }
}

TEST(FrameTest, AcceptsAttachmentDataAnywhere) {
  // A foreign sender may put field 15 first; any valid serialization is accepted.
  wire::RpcRequest env;
  env.set_request_id(5);
  auto* t = env.mutable_request()->mutable_pull();
  t->add_items()->set_shard(3);
  std::string blob(16, '\x01');
  std::string bytes = std::string("\x7a\x10", 2) + blob + env.SerializeAsString();
  wire::RpcRequest parsed;
  ReceivedFrame frame;
  ASSERT_TRUE(frame.parse(raw(bytes), &parsed).ok());
  EXPECT_EQ(parsed.request_id(), 5u);
  EXPECT_EQ(frame.size(), 16u);
}

TEST(FrameTest, RejectsMalformedBytes) {
  const std::string cases[] = {
      std::string("\xff\xff\xff", 3),             // truncated varint tag
      std::string("\x08", 1),                     // tag without its varint
      std::string("\x1a\x05\x01", 3),             // length-delimited field longer than the message
      std::string("\x7a\x05\x01\x02", 4),         // truncated attachment_data
      std::string("\x7a\x01\x00\x7a\x01\x00", 6), // attachment_data twice
      std::string("\x0b\x0c", 2),                 // a group
      std::string("\x00\x00", 2),                 // field number 0
      std::string("\x09\x01\x02", 3),             // truncated fixed64
      std::string("\x1a\x02\xff\xff", 4),         // `request` field whose contents do not parse
  };
  for (const auto& bytes : cases) {
    wire::RpcRequest parsed;
    ReceivedFrame frame;
    Status st = frame.parse(raw(bytes), &parsed);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << ::testing::PrintToString(bytes);
  }
  wire::RpcRequest parsed;
  ReceivedFrame frame;
  EXPECT_EQ(frame.parse(grpc::ByteBuffer(), &parsed).code(), StatusCode::kInvalidArgument);
}

TEST(ConvertMalformedTest, StalenessAndReadVersionsAreCheckedNamingTheField) {
  wire::Response push;
  push.mutable_push()->mutable_staleness()->add_counts(1);
  push.mutable_push()->mutable_staleness()->set_total(1);
  Response response;
  const std::string histogram = rejection(push, &response);
  EXPECT_NE(histogram.find("staleness"), std::string::npos) << histogram;
  EXPECT_NE(histogram.find("buckets"), std::string::npos) << histogram;

  wire::Request negative;
  negative.mutable_push()->add_updates()->set_read_version(-2);
  Request request;
  const std::string version = rejection(negative, &request);
  EXPECT_NE(version.find("read_version"), std::string::npos) << version;
}

}  // namespace
}  // namespace twinps::net
