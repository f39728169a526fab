//===- KilnModule.cpp - The Python module kiln._kiln -------------*- C++ -*-===//
//
// pybind11 bindings of include/kiln/kiln.h and kiln/Cuda.h: Model,
// Executable, compile, compile_cuda, CudaModel and kiln.Error
// (docs/PYTHON.md). Arrays cross without copies where they can:
//
//   - an input that is a C-contiguous, aligned buffer (a NumPy array) of a
//     dtype Kiln has is borrowed (kiln::Tensor::borrow keeps a reference to
//     it, dropped under the GIL); any other object with __dlpack__ (a
//     torch.Tensor on the CPU, through its .numpy(); anything else through
//     numpy.from_dlpack) becomes one, also without a copy; a non-contiguous
//     array is copied to C order first (the one copy, documented);
//   - an output is numpy.asarray of an _OutputBuffer, a buffer-protocol
//     object holding the kiln::Tensor: an array over the run's output
//     block that keeps it alive; when an input was a torch.Tensor, outputs
//     are torch tensors over the same memory (torch.from_numpy).
//
// run() releases the GIL, so Python threads can run one Executable at once.
//
//===----------------------------------------------------------------------===//
#include "kiln/Cuda.h"
#include "kiln/kiln.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace py = pybind11;

namespace {

// Only the buffer protocol (PEP 3118) and Python-level NumPy calls cross
// into NumPy: pybind11 2.10's py::array reads NumPy 1.x struct layouts,
// which NumPy 2 changed (the build tree's venv has NumPy 2).

/// The PEP 3118 format character of a Kiln dtype, from its row of
/// ir/DTypes.def (size, float, signed); '\0' for bf16 and the storage
/// dtypes, which NumPy lacks (ml_dtypes adds them; Kiln does not depend on it).
char formatOf(kiln::DType t) {
  if (t == kiln::DType::Bool)
    return '?';
  if (t == kiln::DType::BF16 || kiln::isStorageDType(t))
    return '\0';
  const unsigned size = kiln::dtypeSize(t);
  if (kiln::isFloat(t))
    return size == 2 ? 'e' : size == 4 ? 'f' : 'd';
  const char *codes = kiln::isSignedInt(t) ? "bhiq" : "BHIQ"; // 1, 2, 4, 8 bytes
  return codes[size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3];
}

std::string bufferFormat(kiln::DType t) {
  const char f = formatOf(t);
  if (f == '\0')
    throw kiln::Error("dtype " + std::string(kiln::dtypeName(t)) +
                      " has no NumPy dtype (cast the model's output to f32)");
  return std::string(1, f);
}

/// The Kiln dtype of a buffer's format and item size, or an error naming
/// the input. Integer formats are matched by size and sign ('l' is 4 or 8
/// bytes depending on the platform).
kiln::DType kilnDType(const py::buffer_info &b, size_t index) {
  std::string f = b.format;
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@'))
    f = f.substr(1);
  const char kind = f.size() == 1 ? f[0] : '\0';
  const bool isInt = kind != '\0' && std::string("bhilq").find(kind) != std::string::npos;
  const bool isUInt = kind != '\0' && std::string("BHILQ").find(kind) != std::string::npos;
  std::string names;
  for (unsigned i = 0; i < kiln::kNumDTypes; ++i) {
    const auto t = static_cast<kiln::DType>(i);
    const char want = formatOf(t);
    if (want == '\0')
      continue;
    names += (names.empty() ? "" : ", ") + std::string(kiln::dtypeName(t));
    if (static_cast<size_t>(b.itemsize) != kiln::dtypeSize(t))
      continue;
    const bool integer = kiln::isInteger(t);
    if ((!integer && kind == want) || (integer && (kiln::isSignedInt(t) ? isInt : isUInt)))
      return t;
  }
  throw kiln::Error("input " + std::to_string(index) + " has elements of format '" + b.format +
                    "' (" + std::to_string(b.itemsize) +
                    " bytes), which Kiln has no dtype for (it takes " + names + ")");
}

/// sys.modules, looked up once at module initialization (kept, never
/// released: a static py::object would be released after the interpreter).
py::dict *sysModules = nullptr;

/// A module the program has imported: from sys.modules (a dictionary
/// lookup on the run path), else imported now.
py::object imported(const char *name) {
  if (sysModules->contains(name))
    return (*sysModules)[name];
  return py::module_::import(name);
}

/// Whether `obj` is a torch.Tensor (a Parameter too), without importing
/// torch when the program has not.
bool isTorchTensor(py::handle obj) {
  return sysModules->contains("torch") &&
         py::isinstance(obj, (*sysModules)["torch"].attr("Tensor").cast<py::object>());
}

/// Runs `fn` (no Python calls in it) without the GIL (not with
/// py::gil_scoped_release, whose destructor takes it back with no way to
/// see the interpreter shutting down).
template <typename Fn> auto withoutGil(Fn &&fn) {
  std::optional<decltype(fn())> result;
  std::exception_ptr error;
  PyThreadState *state = PyEval_SaveThread();
  try {
    result.emplace(fn());
  } catch (...) {
    error = std::current_exception();
  }
  // A daemon thread back from a run while the interpreter shuts down would
  // be ended by PyEval_RestoreThread with pthread_exit, whose unwinding
  // through pybind11's frames crashes. It waits for the process to end
  // instead, as Python 3.14 makes such threads do.
  while (_Py_IsFinalizing())
    pause();
  PyEval_RestoreThread(state);
  if (error)
    std::rethrow_exception(error);
  return std::move(*result);
}

bool isCContiguous(const py::buffer_info &b) {
  py::ssize_t expect = b.itemsize;
  for (size_t d = b.shape.size(); d-- > 0;) {
    if (b.shape[d] != 1 && b.strides[d] != expect)
      return false;
    expect *= b.shape[d];
  }
  return true;
}

/// A buffer view and the object it is of, released under the GIL.
struct HeldBuffer {
  py::object object;
  py::buffer_info view;
};

/// A kiln::Tensor over input `index` (the Note at the top: borrowed when it
/// can be, copied once to C order when it is not contiguous).
kiln::Tensor toTensor(py::handle obj, size_t index) {
  py::object numpy = imported("numpy");
  py::object source = py::reinterpret_borrow<py::object>(obj);
  try {
    // A CPU tensor's .numpy() shares its memory (for every dtype, where
    // torch 1.13's DLPack refuses bool); detach() is a view, not a copy.
    if (isTorchTensor(obj))
      source = source.attr("detach")().attr("numpy")();
    else if (py::hasattr(obj, "__dlpack__") && !py::isinstance(obj, numpy.attr("ndarray")))
      source = numpy.attr("from_dlpack")(obj);
  } catch (py::error_already_set &e) {
    throw kiln::Error("input " + std::to_string(index) + " (a " +
                      py::type::handle_of(obj).attr("__name__").cast<std::string>() +
                      ") cannot be read in place: " + std::string(e.what()));
  }
  if (!PyObject_CheckBuffer(source.ptr()))
    throw kiln::Error("input " + std::to_string(index) + " is a " +
                      py::type::handle_of(obj).attr("__name__").cast<std::string>() +
                      ", not an array (give a NumPy array or a tensor with __dlpack__)");
  auto held = std::make_unique<HeldBuffer>();
  held->object = source;
  held->view = py::reinterpret_borrow<py::buffer>(source).request();
  const kiln::DType dtype = kilnDType(held->view, index);
  const bool aligned =
      reinterpret_cast<uintptr_t>(held->view.ptr) % static_cast<uintptr_t>(held->view.itemsize) ==
      0;
  if (!isCContiguous(held->view) || !aligned) {
    held->object = numpy.attr("ascontiguousarray")(source);
    held->view = py::reinterpret_borrow<py::buffer>(held->object).request();
  }
  std::vector<int64_t> shape(held->view.shape.begin(), held->view.shape.end());
  const void *data = held->view.ptr;
  // It may be dropped on any thread, so it takes the GIL; not while the
  // interpreter shuts down, where taking it ends a daemon thread inside
  // this destructor (std::terminate): the reference is left to the exit.
  std::shared_ptr<const void> owner(held.release(), [](const void *p) {
    if (_Py_IsFinalizing())
      return;
    py::gil_scoped_acquire gil;
    delete static_cast<const HeldBuffer *>(p);
  });
  return kiln::Tensor::borrow(dtype, std::move(shape), std::move(owner), data);
}

/// An output tensor exposed through the buffer protocol; numpy.asarray of
/// it is an array over the tensor's memory that keeps it alive.
struct OutputBuffer {
  kiln::Tensor tensor;
};

/// A NumPy array over output `t` (no copy).
py::object toArray(const kiln::Tensor &t) {
  py::object holder = py::cast(OutputBuffer{t});
  return imported("numpy").attr("asarray")(holder);
}

/// Runs `model` (an Executable or a CudaModel) on the arrays `args`.
template <typename Runnable> py::list runOn(Runnable &model, const py::args &args) {
  std::vector<kiln::Tensor> inputs;
  bool torch = false;
  for (size_t i = 0; i < args.size(); ++i) {
    torch |= isTorchTensor(args[i]);
    inputs.push_back(toTensor(args[i], i));
  }
  std::vector<kiln::Tensor> outputs = withoutGil([&] { return model.run(inputs); });
  py::list out;
  py::object fromNumpy = torch ? imported("torch").attr("from_numpy") : py::object();
  for (const kiln::Tensor &t : outputs) {
    py::object a = toArray(t);
    out.append(torch ? fromNumpy(a) : a);
  }
  return out;
}

py::list ports(const std::vector<kiln::PortInfo> &ps) {
  py::list out;
  for (const kiln::PortInfo &p : ps)
    out.append(py::make_tuple(p.name, kiln::dtypeName(p.dtype), p.shape));
  return out;
}

} // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's C++ API (include/kiln/kiln.h); use the package `kiln`.";
  sysModules = new py::dict(py::module_::import("sys").attr("modules"));
  py::register_exception<kiln::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<OutputBuffer>(m, "_OutputBuffer", py::buffer_protocol())
      .def_buffer([](OutputBuffer &b) {
        const kiln::Tensor &t = b.tensor;
        const auto itemsize = static_cast<py::ssize_t>(kiln::dtypeSize(t.dtype()));
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
        std::vector<py::ssize_t> strides(shape.size(), itemsize);
        for (size_t d = shape.size(); d-- > 1;)
          strides[d - 1] = strides[d] * shape[d];
        return py::buffer_info(const_cast<void *>(t.rawData()), itemsize, bufferFormat(t.dtype()),
                               static_cast<py::ssize_t>(shape.size()), shape, strides);
      });

  py::class_<kiln::Model>(m, "Model", "A model to compile: an ONNX model or Kiln IR (.kir).")
      .def_static("load", &kiln::Model::load, py::arg("path"),
                  py::arg("dims") = std::map<std::string, int64_t>{},
                  "Reads an ONNX model (.onnx) or Kiln IR (.kir); `dims` binds symbolic dims "
                  "of an ONNX model at import. A symbolic artifact (kiln compile --dim "
                  "SYM=LO..HI -o) loads with its kernels: compile() runs them.")
      .def_property_readonly(
          "inputs", [](const kiln::Model &md) { return ports(md.inputs()); },
          "(name, dtype, shape) per input; a symbolic dim is -1.")
      .def_property_readonly(
          "outputs", [](const kiln::Model &md) { return ports(md.outputs()); },
          "(name, dtype, shape) per output.");

  py::class_<kiln::Executable>(m, "Executable", "A compiled model; run it from any thread.")
      .def_static("load", &kiln::Executable::load, py::arg("path"),
                  "Loads a .kiln artifact (or size set) without compiling.")
      .def("save", &kiln::Executable::save, py::arg("path"),
           "Writes the compiled model as a .kiln artifact (a per-size model: its sizes "
           "so far, as a size set).")
      .def("save_symbolic", &kiln::Executable::saveSymbolic, py::arg("path"),
           "Writes a per-size model as a symbolic artifact: its graph and kernels with "
           "run-time sizes; kiln.load gives an Executable for every size in its ranges.")
      .def("run", &runOn<const kiln::Executable>,
           "Runs on the inputs (arrays, in input order); returns the outputs.")
      .def_property_readonly(
          "inputs", [](const kiln::Executable &e) { return ports(e.inputs()); },
          "(name, dtype, shape) per input.")
      .def_property_readonly(
          "outputs", [](const kiln::Executable &e) { return ports(e.outputs()); },
          "(name, dtype, shape) per output.")
      .def_property_readonly("summary", &kiln::Executable::summary, "What was compiled.")
      .def_property_readonly("specializations", &kiln::Executable::specializations,
                             "The sizes compiled so far (a per-size model) or held (a size "
                             "set).");

  m.def(
      "compile",
      [](const kiln::Model &model, int threads, const std::string &cpu,
         const std::map<std::string, int64_t> &dims, bool fusion, bool libraries, bool cache,
         size_t maxSpecializations,
         const std::map<std::string, std::pair<int64_t, int64_t>> &ranges) {
        if (threads < 0)
          throw kiln::Error("compile: threads = " + std::to_string(threads) +
                            " (0 means OpenMP's default)");
        if (maxSpecializations < 1)
          throw kiln::Error("compile: max_specializations must be at least 1");
        kiln::CompileOptions o;
        o.threads = threads;
        o.cpu = cpu;
        o.dims = dims;
        o.fusion = fusion;
        o.libraries = libraries;
        o.cache = cache;
        o.maxSpecializations = maxSpecializations;
        for (const auto &[name, range] : ranges)
          o.ranges[name] = {range.first, range.second};
        return withoutGil([&] { return kiln::compile(model, o); });
      },
      py::arg("model"), py::arg("threads") = 0, py::arg("cpu") = "native",
      py::arg("dims") = std::map<std::string, int64_t>{}, py::arg("fusion") = true,
      py::arg("libraries") = true, py::arg("cache") = false,
      py::arg("max_specializations") = size_t(8),
      py::arg("ranges") = std::map<std::string, std::pair<int64_t, int64_t>>{},
      "Compiles a Model (kiln::compile).");

  m.def(
      "compile_cuda",
      [](const kiln::Model &model, const std::string &path, int arch,
         const std::map<std::string, int64_t> &dims, bool fusion, bool libraries) {
        kiln::CudaCompileOptions o;
        o.arch = arch;
        o.dims = dims;
        o.fusion = fusion;
        o.libraries = libraries;
        withoutGil([&] {
          kiln::compileForCuda(model, path, o);
          return 0;
        });
      },
      py::arg("model"), py::arg("path"), py::arg("arch") = 90,
      py::arg("dims") = std::map<std::string, int64_t>{}, py::arg("fusion") = true,
      py::arg("libraries") = true,
      "Compiles a Model for a CUDA GPU into a CUDA artifact (kiln::compileForCuda).");

  m.def(
      "to_mlir",
      [](const kiln::Model &model, bool pipeline, int64_t inlineElements) {
        kiln::MlirOptions o;
        o.pipeline = pipeline;
        o.inlineElements = inlineElements;
        return withoutGil([&] { return kiln::toMlir(model, o); });
      },
      py::arg("model"), py::arg("pipeline") = true, py::arg("inline_elements") = int64_t(16),
      "The Model's graph as an MLIR 16 module (kiln::toMlir).");

  py::class_<kiln::CudaModel>(m, "CudaModel",
                              "A CUDA artifact loaded on the machine's first GPU "
                              "(kiln::CudaModel); one run at a time.")
      .def_static("load", &kiln::CudaModel::load, py::arg("path"),
                  "Loads a CUDA artifact on the first GPU; kiln.Error saying what is "
                  "missing where there is none.")
      .def("run", &runOn<kiln::CudaModel>,
           "Runs on host arrays (in input order): copied to the GPU, outputs copied back.")
      .def_property_readonly(
          "inputs", [](const kiln::CudaModel &c) { return ports(c.inputs()); },
          "(name, dtype, shape) per input.")
      .def_property_readonly(
          "outputs", [](const kiln::CudaModel &c) { return ports(c.outputs()); },
          "(name, dtype, shape) per output.")
      .def_property_readonly("summary", &kiln::CudaModel::summary,
                             "The GPU, the code it runs and how its steps are launched.");
}
