//===- OnnxTensor.cpp - ONNX TensorProto to Kiln tensors --------*- C++ -*-===//
//
// Decodes the three ways a TensorProto stores its elements: `raw_data`
// (little-endian bytes), the typed repeated fields (`float_data`,
// `int32_data` for every narrow type, `int64_data`, `uint64_data` for u32,
// `double_data`), and
// external data (`data_location: EXTERNAL`, whose `location`, `offset` and
// `length` name a byte range of a file in the model's folder). Sizes are
// checked before anything is allocated, so corrupt dims cannot make the
// importer allocate absurd amounts of memory.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace kiln::onnximport {

std::optional<DType> dtypeFromOnnx(int32_t elemType) {
  // The ONNX data types of Kiln's dtypes (FLOAT8E8M0, the float6 types,
  // UINT64, STRING and the complex types are not Kiln dtypes).
  static constexpr std::pair<int32_t, DType> kTypes[] = {{onnx::TensorProto::FLOAT, DType::F32},
                                                         {onnx::TensorProto::FLOAT16, DType::F16},
                                                         {onnx::TensorProto::BFLOAT16, DType::BF16},
                                                         {onnx::TensorProto::DOUBLE, DType::F64},
                                                         {onnx::TensorProto::INT8, DType::I8},
                                                         {onnx::TensorProto::UINT8, DType::U8},
                                                         {onnx::TensorProto::INT16, DType::I16},
                                                         {onnx::TensorProto::UINT16, DType::U16},
                                                         {onnx::TensorProto::INT32, DType::I32},
                                                         {onnx::TensorProto::UINT32, DType::U32},
                                                         {onnx::TensorProto::INT64, DType::I64},
                                                         {onnx::TensorProto::BOOL, DType::Bool},
                                                         {kOnnxFloat8E4M3FN, DType::F8E4M3FN},
                                                         {kOnnxFloat8E4M3FNUZ, DType::F8E4M3FNUZ},
                                                         {kOnnxFloat8E5M2, DType::F8E5M2},
                                                         {kOnnxFloat8E5M2FNUZ, DType::F8E5M2FNUZ},
                                                         {kOnnxUInt4, DType::U4},
                                                         {kOnnxInt4, DType::I4},
                                                         {kOnnxFloat4E2M1, DType::F4E2M1FN},
                                                         {kOnnxUInt2, DType::U2},
                                                         {kOnnxInt2, DType::I2}};
  for (const auto &[onnxType, dtype] : kTypes)
    if (onnxType == elemType)
      return dtype;
  return std::nullopt;
}

std::string onnxTypeName(int32_t elemType) {
  if (onnx::TensorProto_DataType_IsValid(elemType))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elemType));
  // The types that ONNX added after the 1.12 classes Kiln is built with
  // (onnx.proto's TensorProto.DataType, 1.14 to 1.23).
  static const char *const kNewer[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",
      "FLOAT4E2M1",   "FLOAT8E8M0",     "UINT2",      "INT2",           "FLOAT6E2M3", "FLOAT6E3M2"};
  static_assert(std::size(kNewer) == kOnnxFloat6E3M2 - kOnnxFloat8E4M3FN + 1,
                "one name per NewerOnnxType, in its order");
  constexpr int32_t kFirstNewer = kOnnxFloat8E4M3FN;
  if (elemType >= kFirstNewer && elemType < kFirstNewer + static_cast<int32_t>(std::size(kNewer)))
    return kNewer[elemType - kFirstNewer];
  return "type " + std::to_string(elemType);
}

namespace {

/// Parses a non-negative decimal integer; nullopt on anything else.
std::optional<int64_t> parseSize(const std::string &s) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0)
    return std::nullopt;
  return v;
}

/// Reads the external bytes of `proto` into `out` (exactly `byteSize`).
LogicalResult readExternal(const onnx::TensorProto &proto, const std::string &baseDir,
                           const std::string &what, size_t byteSize, const Location &loc,
                           DiagnosticEngine &diag, std::string &out) {
  std::string location;
  std::optional<int64_t> offset = 0, length;
  for (const auto &kv : proto.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      offset = parseSize(kv.value());
      if (!offset)
        return diag.emitError(loc)
               << what << " has a bad external data offset '" << kv.value() << "'";
    } else if (kv.key() == "length") {
      length = parseSize(kv.value());
      if (!length)
        return diag.emitError(loc)
               << what << " has a bad external data length '" << kv.value() << "'";
    }
  }
  if (location.empty())
    return diag.emitError(loc) << what << " has external data without a 'location'";
  std::filesystem::path rel(location);
  if (rel.is_absolute())
    return diag.emitError(loc) << what << " has an absolute external data location '" << location
                               << "'; ONNX requires a path relative to the model's folder";
  for (const auto &part : rel)
    if (part == "..")
      return diag.emitError(loc) << what << " has external data location '" << location
                                 << "' outside the model's folder";
  std::filesystem::path full = std::filesystem::path(baseDir.empty() ? "." : baseDir) / rel;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(full, ec))
    return diag.emitError(loc) << what << ": external data file '" << full.string()
                               << "' does not exist";
  uint64_t fileSize = std::filesystem::file_size(full, ec);
  if (ec)
    return diag.emitError(loc) << what << ": cannot read the size of external data file '"
                               << full.string() << "': " << ec.message();
  if (length && static_cast<uint64_t>(*length) != byteSize)
    return diag.emitError(loc) << what << " needs " << byteSize
                               << " bytes but its external data length is " << *length;
  if (static_cast<uint64_t>(*offset) > fileSize ||
      fileSize - static_cast<uint64_t>(*offset) < byteSize)
    return diag.emitError(loc) << what << " needs " << byteSize << " bytes at offset " << *offset
                               << " of external data file '" << full.string()
                               << "', which is too short (" << fileSize << " bytes)";
  std::ifstream in(full, std::ios::binary);
  if (!in)
    return diag.emitError(loc) << what << ": cannot open external data file '" << full.string()
                               << "'";
  out.resize(byteSize);
  in.seekg(static_cast<std::streamoff>(*offset));
  in.read(out.data(), static_cast<std::streamsize>(byteSize));
  if (!in)
    return diag.emitError(loc) << what << ": cannot read " << byteSize
                               << " bytes from external data file '" << full.string() << "'";
  return success();
}

/// The typed field of a TensorProto that holds its data_type's elements
/// when there is no raw_data, and how many it holds.
struct TypedField {
  const char *name;
  int64_t given;
};
TypedField typedField(const onnx::TensorProto &proto) {
  switch (proto.data_type()) {
  case onnx::TensorProto::FLOAT:
    return {"float_data", proto.float_data_size()};
  case onnx::TensorProto::DOUBLE:
    return {"double_data", proto.double_data_size()};
  case onnx::TensorProto::INT64:
    return {"int64_data", proto.int64_data_size()};
  case onnx::TensorProto::UINT32:
    return {"uint64_data", proto.uint64_data_size()};
  default: // the narrower types, one per int32
    return {"int32_data", proto.int32_data_size()};
  }
}

/// Copies `count` values of a typed repeated field into `t`, converting.
template <typename Field, typename Set> void copyField(const Field &field, int64_t count, Set set) {
  for (int64_t i = 0; i < count; ++i)
    set(i, field.Get(static_cast<int>(i)));
}

} // namespace

FailureOr<Tensor> tensorFromProto(const onnx::TensorProto &proto, const std::string &baseDir,
                                  const std::string &what, const Location &loc,
                                  DiagnosticEngine &diag) {
  std::optional<DType> dtype = dtypeFromOnnx(proto.data_type());
  if (!dtype)
    return diag.emitError(loc) << what << " has data type " << onnxTypeName(proto.data_type())
                               << ", which Kiln does not support";
  if (proto.has_segment())
    return diag.emitError(loc) << what << " is segmented, which Kiln does not support";
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0)
      return diag.emitError(loc) << what << " has a negative dim " << d;
    if (__builtin_mul_overflow(numel, d, &numel))
      return diag.emitError(loc) << what << " has too many elements";
    shape.push_back(d);
  }
  // ONNX packs the elements of a sub-byte storage dtype (i4: two to a byte,
  // low bits first; bool keeps a byte each); a Kiln buffer holds one per byte.
  const unsigned perByte =
      isStorageDType(*dtype) && dtypeBits(*dtype) < 8 ? 8 / dtypeBits(*dtype) : 1;
  const size_t esize = dtypeSize(*dtype);
  uint64_t elemBytes;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), esize, &elemBytes) ||
      elemBytes > (uint64_t(1) << 40))
    return diag.emitError(loc) << what << " of shape " << sizesStr(shape) << " is too large";
  const uint64_t byteSize = (elemBytes + perByte - 1) / perByte;

  std::string external;
  const std::string *raw = nullptr;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    if (failed(readExternal(proto, baseDir, what, byteSize, loc, diag, external)))
      return failure();
    raw = &external;
  } else if (proto.has_raw_data()) {
    raw = &proto.raw_data();
    if (raw->size() != byteSize)
      return diag.emitError(loc) << what << " of type " << dtypeName(*dtype) << sizesStr(shape)
                                 << " needs " << byteSize << " bytes of raw data, got "
                                 << raw->size();
  }

  // Typed fields: their element count must match before anything is
  // allocated (a tiny file may claim a huge shape).
  const TypedField field = typedField(proto);
  const int64_t fieldCount = static_cast<int64_t>(perByte == 1 ? numel : byteSize);
  if (!raw && field.given != fieldCount)
    return diag.emitError(loc) << what << " of type " << dtypeName(*dtype) << sizesStr(shape)
                               << " needs " << fieldCount << " values in " << field.name << ", got "
                               << field.given;

  Tensor t = Tensor::zeros(*dtype, shape);
  if (perByte > 1) {
    const unsigned bits = dtypeBits(*dtype);
    for (int64_t i = 0; i < numel; ++i) {
      const int64_t byte = i / perByte;
      const auto packed = static_cast<uint8_t>(raw ? (*raw)[static_cast<size_t>(byte)]
                                                   : proto.int32_data(static_cast<int>(byte)));
      const unsigned code =
          (packed >> (bits * static_cast<unsigned>(i % perByte))) & ((1u << bits) - 1);
      if (isFloat(*dtype)) // f4e2m1fn: the code is the element
        t.mutableData<uint8_t>()[i] = static_cast<uint8_t>(code);
      else // wraps into i4/i2 (sign extension)
        t.setInt(i, code);
    }
    return t;
  }
  if (raw) {
    if (byteSize)
      std::memcpy(t.mutableRawData(), raw->data(), byteSize);
    if (*dtype == DType::Bool) // normalize to 0/1
      for (int64_t i = 0; i < numel; ++i)
        t.mutableData<uint8_t>()[i] = t.mutableData<uint8_t>()[i] != 0;
    return t;
  }

  switch (proto.data_type()) {
  case onnx::TensorProto::FLOAT:
    copyField(proto.float_data(), numel,
              [&](int64_t i, float v) { t.mutableData<float>()[i] = v; });
    break;
  case onnx::TensorProto::DOUBLE:
    copyField(proto.double_data(), numel,
              [&](int64_t i, double v) { t.mutableData<double>()[i] = v; });
    break;
  case onnx::TensorProto::INT64:
    copyField(proto.int64_data(), numel, [&](int64_t i, int64_t v) { t.setInt(i, v); });
    break;
  case onnx::TensorProto::UINT32:
    copyField(proto.uint64_data(), numel,
              [&](int64_t i, uint64_t v) { t.setInt(i, static_cast<int64_t>(v)); });
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    // Stored as the 16-bit patterns, one per int32.
    copyField(proto.int32_data(), numel, [&](int64_t i, int32_t v) {
      t.mutableData<uint16_t>()[i] = static_cast<uint16_t>(v);
    });
    break;
  case kOnnxFloat8E4M3FN: // the 8-bit floats: their codes, one per int32
  case kOnnxFloat8E4M3FNUZ:
  case kOnnxFloat8E5M2:
  case kOnnxFloat8E5M2FNUZ:
    copyField(proto.int32_data(), numel,
              [&](int64_t i, int32_t v) { t.mutableData<uint8_t>()[i] = static_cast<uint8_t>(v); });
    break;
  default: // INT32, INT16, UINT16, INT8, UINT8, BOOL
    copyField(proto.int32_data(), numel, [&](int64_t i, int32_t v) { t.setInt(i, v); });
    break;
  }
  return t;
}

} // namespace kiln::onnximport

namespace kiln {

FailureOr<Tensor> readOnnxTensorFile(const std::string &path, DiagnosticEngine &diag) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return diag.emitError(Location::file(path)) << "cannot open tensor file";
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return diag.emitError(Location::file(path))
           << "not a valid ONNX TensorProto: the protobuf data is corrupt or truncated ("
           << bytes.size() << " bytes)";
  std::string dir = std::filesystem::path(path).parent_path().string();
  return onnximport::tensorFromProto(proto, dir.empty() ? "." : dir,
                                     "tensor '" + proto.name() + "'", Location::file(path), diag);
}

} // namespace kiln
