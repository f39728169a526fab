//===- Npy.cpp - NumPy .npy files -------------------------------*- C++ -*-===//
#include "ir/Npy.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace kiln {
namespace {

struct NpyDType {
  const char *descr;
  DType dtype;
};
constexpr NpyDType kNpyTypes[] = {
    {"<f4", DType::F32}, {"<f2", DType::F16}, {"<f8", DType::F64},  {"|i1", DType::I8},
    {"|u1", DType::U8},  {"<i2", DType::I16}, {"<u2", DType::U16},  {"<i4", DType::I32},
    {"<u4", DType::U32}, {"<i8", DType::I64}, {"|b1", DType::Bool},
};

// Finds the value text of `'key':` in a header dict.
std::string dictValue(const std::string &header, const std::string &key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos)
    return "";
  size_t colon = header.find(':', k);
  if (colon == std::string::npos)
    return "";
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos)
    return "";
  if (header[start] == '(') {
    size_t end = header.find(')', start);
    return end == std::string::npos ? "" : header.substr(start, end - start + 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end == std::string::npos ? std::string::npos : end - start);
}
} // namespace

FailureOr<Tensor> parseNpy(std::string_view bytes, const std::string &what,
                           DiagnosticEngine &diag) {
  auto bad = [&](const std::string &why) -> FailureOr<Tensor> {
    return diag.emitError(Location()) << "'" << what << "' is not a valid .npy file: " << why;
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY")
    return bad("missing the \\x93NUMPY magic");
  unsigned major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return bad("unsupported version " + std::to_string(major));
  }
  if (headerStart + headerLen > bytes.size())
    return bad("truncated header");
  std::string header(bytes.substr(headerStart, headerLen));
  std::string descr = dictValue(header, "descr");
  std::string fortran = dictValue(header, "fortran_order");
  std::string shapeText = dictValue(header, "shape");
  if (descr.size() < 2 || shapeText.empty())
    return bad("header lacks 'descr' or 'shape'");
  descr = descr.substr(1, descr.size() - 2);
  if (fortran.rfind("True", 0) == 0)
    return bad("Fortran-order arrays are not supported; save with np.ascontiguousarray");
  const NpyDType *found = nullptr;
  for (const NpyDType &t : kNpyTypes)
    if (descr == t.descr ||
        (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(t.descr).substr(1)))
      found = &t;
  if (!found)
    return bad("unsupported dtype '" + descr +
               "' (supported: f2 f4 f8 i1 u1 i4 i8 b1, little-endian)");
  std::vector<int64_t> shape;
  std::string inner = shapeText.substr(1, shapeText.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a == std::string::npos)
      continue;
    item = item.substr(a, b - a + 1);
    if (!item.empty() && item.back() == 'L')
      item.pop_back();
    int64_t v;
    auto res = std::from_chars(item.data(), item.data() + item.size(), v);
    if (res.ec != std::errc() || res.ptr != item.data() + item.size() || v < 0)
      return bad("bad shape " + shapeText);
    shape.push_back(v);
  }
  size_t dataStart = headerStart + headerLen;
  auto n = checkedNumElements(shape);
  auto need = n ? checkedByteSize(*n, dtypeSize(found->dtype), kMaxTensorFileBytes) : std::nullopt;
  if (!need)
    return bad("shape " + shapeText + " is too large");
  if (bytes.size() - dataStart < *need)
    return bad("data is truncated: shape " + shapeText + " needs " + std::to_string(*need) +
               " bytes, file has " + std::to_string(bytes.size() - dataStart));
  return Tensor::fromBytes(found->dtype, shape, bytes.data() + dataStart);
}

FailureOr<Tensor> readNpy(const std::string &path, DiagnosticEngine &diag) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return diag.emitError(Location()) << "cannot open '" << path << "'";
  std::stringstream ss;
  ss << in.rdbuf();
  return parseNpy(ss.str(), path, diag);
}

std::string encodeNpy(const Tensor &t) {
  const char *descr = nullptr;
  for (const NpyDType &n : kNpyTypes)
    if (n.dtype == t.dtype())
      descr = n.descr;
  KILN_ASSERT(descr && "encodeNpy: callers check the dtype first");
  std::string shape = "(";
  for (int64_t d : t.shape())
    shape += std::to_string(d) + ",";
  if (t.rank() > 1)
    shape.pop_back();
  shape += ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 255);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char *>(t.rawData()), t.byteSize());
  return out;
}

LogicalResult writeNpy(const std::string &path, const Tensor &t, DiagnosticEngine &diag) {
  if (t.dtype() == DType::BF16 || isStorageDType(t.dtype()))
    return diag.emitError(Location()) << "cannot write '" << path << "': " << dtypeName(t.dtype())
                                      << " has no NumPy dtype; cast it to f32 first";
  std::ofstream out(path, std::ios::binary);
  if (!out)
    return diag.emitError(Location()) << "cannot write '" << path << "'";
  std::string bytes = encodeNpy(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    return diag.emitError(Location()) << "error writing '" << path << "'";
  return success();
}

} // namespace kiln
