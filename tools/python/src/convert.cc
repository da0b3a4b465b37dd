#include "tools/python/src/convert.h"

#include <climits>
#include <complex>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pybind11/numpy.h"
#include "rpc/value/dtype.h"
#include "tools/python/src/errors.h"
#include "tools/python/src/rref_handle.h"

namespace ferry::python {

namespace {

PythonClasses classes;

absl::Status Invalid(const Path& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path.ToString(), ": ", what));
}

std::string TypeName(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__name__"));
}

// torch.Tensor, once torch has been imported by anyone (ferry never
// imports it: without torch there are no torch tensors to find).
PyObject* TorchTensorType() {
  static PyObject* type = nullptr;
  if (type != nullptr) return type;
  PyObject* torch = PyImport_GetModule(py::str("torch").ptr());
  if (torch == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* t = PyObject_GetAttrString(torch, "Tensor");
  Py_DECREF(torch);
  if (t == nullptr) PyErr_Clear();
  type = t;  // Kept for the life of the process.
  return type;
}

bool IsTorchTensor(py::handle object) {
  PyObject* type = TorchTensorType();
  return type != nullptr && PyObject_IsInstance(object.ptr(), type) == 1;
}

// The module tables below are set under the GIL, not by function-local
// statics' initializers: a module's first import releases the GIL (it reads
// files), and a second thread reaching such an initializer's guard then
// waits there holding the GIL the first one needs back -- a deadlock (two
// calls converting at once in a worker whose program had not imported
// numpy or torch yet). Two threads may both build a table; one is kept.
py::module_& Torch() {
  static py::module_* torch = nullptr;
  if (torch == nullptr) {
    py::module_ m = py::module_::import("torch");
    if (torch == nullptr) torch = new py::module_(std::move(m));
  }
  return *torch;
}

// numpy's dtype for each ferry dtype (bfloat16: its bits, as int16).
const py::dtype& NumpyDType(DType dtype) {
  static std::vector<py::dtype>* table = nullptr;
  if (table == nullptr) {
    auto t = std::make_unique<std::vector<py::dtype>>(13);
    py::module_ np = py::module_::import("numpy");
    const std::pair<DType, const char*> names[] = {
        {DType::kBool, "bool"},           {DType::kUInt8, "uint8"},
        {DType::kInt8, "int8"},           {DType::kInt16, "int16"},
        {DType::kInt32, "int32"},         {DType::kInt64, "int64"},
        {DType::kFloat16, "float16"},     {DType::kBFloat16, "int16"},
        {DType::kFloat32, "float32"},     {DType::kFloat64, "float64"},
        {DType::kComplex64, "complex64"}, {DType::kComplex128, "complex128"},
    };
    for (const auto& [d, name] : names) {
      (*t)[static_cast<int>(d)] = py::dtype::from_args(py::str(name));
    }
    if (table == nullptr) table = t.release();  // Kept for the process.
  }
  return (*table)[static_cast<int>(dtype)];
}

// numpy 2 moved PyArray_Descr's elsize, which pybind11 2.10 (Debian's)
// reads at numpy 1.x's offset: sizes are read as Python attributes, the
// same under numpy 1.x (Debian's) and 2.x (the peers environment's), so
// one extension serves both.
py::ssize_t ItemSize(const py::dtype& dt) {
  return dt.attr("itemsize").cast<py::ssize_t>();
}

size_t NBytes(const py::array& a) { return a.attr("nbytes").cast<size_t>(); }

// C-order strides of `shape` for elements of `itemsize` bytes (given to
// pybind11, which would otherwise compute them from the dtype's elsize).
std::vector<py::ssize_t> CStrides(const Shape& shape, size_t itemsize) {
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(itemsize);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= static_cast<py::ssize_t>(shape[i]);
  }
  return strides;
}

// The ferry dtype of a numpy dtype; nullopt for those ferry lacks.
std::optional<DType> FromNumpyDType(const py::dtype& dt) {
  const char kind = dt.kind();
  const py::ssize_t size = ItemSize(dt);
  switch (kind) {
    case 'b':
      return DType::kBool;
    case 'u':
      if (size == 1) return DType::kUInt8;
      break;
    case 'i':
      if (size == 1) return DType::kInt8;
      if (size == 2) return DType::kInt16;
      if (size == 4) return DType::kInt32;
      if (size == 8) return DType::kInt64;
      break;
    case 'f':
      if (size == 2) return DType::kFloat16;
      if (size == 4) return DType::kFloat32;
      if (size == 8) return DType::kFloat64;
      break;
    case 'c':
      if (size == 8) return DType::kComplex64;
      if (size == 16) return DType::kComplex128;
      break;
  }
  return std::nullopt;
}

constexpr int kCContiguous = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
constexpr int kAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
constexpr int kWriteable = py::detail::npy_api::NPY_ARRAY_WRITEABLE_;

bool NativeOrder(const py::dtype& dt) {
  char order = dt.attr("byteorder").cast<std::string>()[0];
  return order != '>';  // '=', '|' or '<' (x86-64 and arm64 are little-endian)
}

Shape ShapeOf(const py::array& a) {
  return Shape(a.shape(), a.shape() + a.ndim());
}

// A numpy array made of ferry Tensor memory carries the Tensor in a capsule
// of this name (its base), so handing it back to ferry reuses the Tensor.
constexpr char kCapsuleName[] = "ferry.Tensor";

std::optional<Tensor> TensorBehind(const py::array& a) {
  PyObject* base = py::detail::array_proxy(a.ptr())->base;
  if (base == nullptr || !PyCapsule_IsValid(base, kCapsuleName)) {
    return std::nullopt;
  }
  const auto* t =
      static_cast<const Tensor*>(PyCapsule_GetPointer(base, kCapsuleName));
  if (t->data() != static_cast<const char*>(a.data()) ||
      t->nbytes() != NBytes(a) || t->shape() != ShapeOf(a)) {
    return std::nullopt;
  }
  return *t;
}

absl::StatusOr<Tensor> FromNumpy(py::array a, std::optional<DType> as,
                                 const Path& path, ConvertState* state) {
  std::optional<DType> dtype = as.has_value() ? as : FromNumpyDType(a.dtype());
  if (!dtype.has_value()) {
    return Invalid(path, absl::StrCat("ferry has no dtype for numpy's ",
                                      std::string(py::str(a.dtype()))));
  }
  if (!as.has_value()) {
    if (std::optional<Tensor> t = TensorBehind(a)) return *t;
  }
  const int flags = py::detail::array_proxy(a.ptr())->flags;
  if ((flags & kCContiguous) == 0 || (flags & kAligned) == 0 ||
      !NativeOrder(a.dtype())) {
    // Copied into a fresh contiguous native array: the copy is ferry's alone.
    py::module_ np = py::module_::import("numpy");
    a = np.attr("ascontiguousarray")(
        a, a.dtype().attr("newbyteorder")(py::str("=")));
  }
  return WrapPythonMemory(a, *dtype, ShapeOf(a),
                          static_cast<const char*>(a.data()), NBytes(a),
                          state->leases);
}

// torch tensor → a numpy array over the same memory (bfloat16 as its int16
// bits), and the ferry dtype.
absl::StatusOr<std::pair<py::array, DType>> TorchToNumpy(py::handle object,
                                                         const Path& path) {
  py::object t = py::reinterpret_borrow<py::object>(object);
  if (t.attr("requires_grad").cast<bool>()) t = t.attr("detach")();
  if (!t.attr("is_cpu").cast<bool>()) t = t.attr("cpu")();
  if (t.attr("is_conj")().cast<bool>()) t = t.attr("resolve_conj")();
  if (t.attr("is_neg")().cast<bool>()) t = t.attr("resolve_neg")();
  if (!t.attr("is_contiguous")().cast<bool>()) t = t.attr("contiguous")();
  py::object dtype = t.attr("dtype");
  if (dtype.is(Torch().attr("bfloat16"))) {
    py::array bits = t.attr("view")(Torch().attr("int16")).attr("numpy")();
    return std::make_pair(std::move(bits), DType::kBFloat16);
  }
  py::array a = t.attr("numpy")();
  std::optional<DType> d = FromNumpyDType(a.dtype());
  if (!d.has_value()) {
    return Invalid(path, absl::StrCat("ferry has no dtype for ",
                                      std::string(py::str(dtype))));
  }
  return std::make_pair(std::move(a), *d);
}

absl::StatusOr<Value> FromInt(py::handle object, const Path& path) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(object.ptr(), &overflow);
  if (overflow != 0) return Invalid(path, "integer does not fit in int64");
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return Invalid(path, "not an integer");
  }
  return Value(static_cast<int64_t>(v));
}

absl::StatusOr<Value> FromComplex(std::complex<double> c) {
  return Value(Tensor::Scalar(c));
}

absl::StatusOr<Value> FromList(py::handle object, const Path& path,
                               ConvertState* state) {
  py::sequence seq = py::reinterpret_borrow<py::sequence>(object);
  Value::List list;
  list.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i) {
    Path item{&path, nullptr, static_cast<int64_t>(i)};
    absl::StatusOr<Value> v = ToValue(seq[i], item, state);
    if (!v.ok()) return v.status();
    list.push_back(*std::move(v));
  }
  return Value(std::move(list));
}

absl::StatusOr<Value> FromDict(py::handle object, const Path& path,
                               ConvertState* state) {
  Value::Map map;
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(object)) {
    if (!PyUnicode_Check(key.ptr())) {
      return Invalid(path,
                     absl::StrCat("map keys must be str, not ", TypeName(key)));
    }
    std::string k = key.cast<std::string>();
    Path item{&path, nullptr, -1, &k};
    absl::StatusOr<Value> v = ToValue(value, item, state);
    if (!v.ok()) return v.status();
    map.emplace(std::move(k), *std::move(v));
  }
  return Value(std::move(map));
}

absl::StatusOr<Value> FromNumpyScalar(py::handle object, const Path& path,
                                      ConvertState* state) {
  py::module_ np = py::module_::import("numpy");
  if (py::isinstance(object, np.attr("bool_"))) {
    return Value(object.cast<bool>());
  }
  if (py::isinstance(object, np.attr("integer"))) {
    return FromInt(object.attr("item")(), path);
  }
  if (py::isinstance(object, np.attr("floating"))) {
    return Value(object.cast<double>());
  }
  // Complex and the rest: a 0-d tensor of the scalar's dtype.
  return ToTensor(np.attr("asarray")(object), path, state);
}

// Copies `bits` (bfloat16 bit patterns) into float32, exactly.
py::array WidenBFloat16(const Tensor& t) {
  py::array_t<float> out(t.shape(), CStrides(t.shape(), sizeof(float)));
  const auto* in = t.data_as<uint16_t>();
  float* o = out.mutable_data();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint32_t w = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(&o[i], &w, sizeof(w));
  }
  return out;
}

// A numpy array over `t`'s bytes, which it keeps alive through a capsule
// holding a copy of the Tensor.
py::array ArrayOver(const Tensor& t, bool writeable) {
  auto* held = new Tensor(t);
  py::capsule owner(held, kCapsuleName, [](PyObject* capsule) {
    delete static_cast<Tensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  });
  std::vector<py::ssize_t> strides = CStrides(t.shape(), t.itemsize());
  // A null pointer would make numpy allocate; empty tensors may have one.
  static const char kEmpty[16] = {};
  const void* data = t.data() != nullptr ? t.data() : kEmpty;
  py::array a(NumpyDType(t.dtype()), t.shape(), strides, data, owner);
  if (!writeable) py::detail::array_proxy(a.ptr())->flags &= ~kWriteable;
  return a;
}

}  // namespace

std::string Path::ToString() const {
  std::string out = parent != nullptr ? parent->ToString() : "";
  if (name != nullptr) absl::StrAppend(&out, name);
  if (index >= 0) absl::StrAppend(&out, "[", index, "]");
  if (key != nullptr) absl::StrAppend(&out, "['", *key, "']");
  return out;
}

void InitNumpy() {
  // pybind11 (2.10) finds numpy's C API on first use, in a function-local
  // static whose initializer imports numpy.core.multiarray. An import can
  // release the GIL (numpy 2 reads its numpy.core shim from disk), and a
  // second thread reaching the static meanwhile waits for the static's
  // guard while holding the GIL: neither goes on. ferry.rpc hung so on
  // torch 2.14 with numpy 2, a caller's first array racing a handler's
  // (1 test in 3 of torch's RPC suite). Here it happens on one thread.
  (void)py::dtype::of<float>();
  (void)NumpyDType(DType::kFloat32);
}

void SetPythonClasses(py::handle rref_class, py::handle make_rref,
                      py::handle bfloat16_class) {
  // Kept for the life of the process.
  classes.rref_class = rref_class.inc_ref();
  classes.make_rref = make_rref.inc_ref();
  classes.bfloat16_class = bfloat16_class.inc_ref();
}

bool IsTensorLike(py::handle object) {
  return py::isinstance<py::array>(object) || IsTorchTensor(object) ||
         (classes.bfloat16_class &&
          py::isinstance(object, classes.bfloat16_class));
}

absl::StatusOr<Tensor> ToTensor(py::handle object, const Path& path,
                                ConvertState* state) {
  if (py::isinstance<py::array>(object)) {
    state->saw_numpy = true;
    return FromNumpy(py::reinterpret_borrow<py::array>(object), std::nullopt,
                     path, state);
  }
  if (IsTorchTensor(object)) {
    state->saw_torch = true;
    absl::StatusOr<std::pair<py::array, DType>> a = TorchToNumpy(object, path);
    if (!a.ok()) return a.status();
    return FromNumpy(std::move(a->first), a->second, path, state);
  }
  if (classes.bfloat16_class &&
      py::isinstance(object, classes.bfloat16_class)) {
    state->saw_numpy = true;
    py::array bits = py::array::ensure(object.attr("bits"));
    if (!bits || ItemSize(bits.dtype()) != 2 || bits.dtype().kind() != 'u') {
      return Invalid(path, "BFloat16.bits must be a uint16 array");
    }
    return FromNumpy(std::move(bits), DType::kBFloat16, path, state);
  }
  return Invalid(path, absl::StrCat("expected a tensor (numpy array or torch "
                                    "tensor), got ",
                                    TypeName(object)));
}

absl::StatusOr<Value> ToValue(py::handle object, const Path& path,
                              ConvertState* state) {
  PyObject* o = object.ptr();
  if (o == Py_None) return Value();
  if (PyBool_Check(o)) return Value(o == Py_True);
  if (PyLong_Check(o)) return FromInt(object, path);
  if (PyFloat_Check(o)) return Value(PyFloat_AS_DOUBLE(o));
  if (PyUnicode_Check(o)) {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(o, &size);
    if (utf8 == nullptr) {
      PyErr_Clear();
      return Invalid(path, "str is not valid UTF-8");
    }
    return Value(std::string(utf8, size));
  }
  if (PyBytes_Check(o)) {
    return Value(Bytes{std::string(PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o))});
  }
  if (PyByteArray_Check(o)) {
    return Value(
        Bytes{std::string(PyByteArray_AS_STRING(o), PyByteArray_GET_SIZE(o))});
  }
  if (PyList_Check(o) || PyTuple_Check(o)) return FromList(object, path, state);
  if (PyDict_Check(o)) return FromDict(object, path, state);
  if (PyComplex_Check(o)) {
    return FromComplex({PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)});
  }
  if (IsTensorLike(object)) {
    absl::StatusOr<Tensor> t = ToTensor(object, path, state);
    if (!t.ok()) return t.status();
    return Value(*std::move(t));
  }
  if (classes.rref_class && py::isinstance(object, classes.rref_class)) {
    return object.attr("_handle").cast<RRefHandle&>().ref.AsValue();
  }
  if (py::isinstance(object, py::module_::import("numpy").attr("generic"))) {
    return FromNumpyScalar(object, path, state);
  }
  return Invalid(path, absl::StrCat("cannot send a ", TypeName(object),
                                    " (ferry sends None, bool, int, float, "
                                    "str, bytes, list, tuple, dict, tensors "
                                    "and RRefs)"));
}

absl::StatusOr<std::vector<Value>> ToValues(py::handle sequence,
                                            const Path& path,
                                            ConvertState* state) {
  if (!PyList_Check(sequence.ptr()) && !PyTuple_Check(sequence.ptr())) {
    return Invalid(path, absl::StrCat("expected a tuple or list, got ",
                                      TypeName(sequence)));
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(sequence);
  std::vector<Value> out;
  out.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i) {
    Path item{&path, nullptr, static_cast<int64_t>(i)};
    absl::StatusOr<Value> v = ToValue(seq[i], item, state);
    if (!v.ok()) return v.status();
    out.push_back(*std::move(v));
  }
  return out;
}

py::object FromTensor(const Tensor& tensor, TensorKind kind) {
  if (kind == TensorKind::kNumpy) {
    if (tensor.dtype() == DType::kBFloat16) return WidenBFloat16(tensor);
    return ArrayOver(tensor, /*writeable=*/false);
  }
  const bool cloned = IsPythonMemory(tensor);
  py::object t = Torch().attr("from_numpy")(ArrayOver(tensor, true));
  if (tensor.dtype() == DType::kBFloat16) {
    t = t.attr("view")(Torch().attr("bfloat16"));
  }
  if (cloned) t = t.attr("clone")();
  return t;
}

py::object FromValue(const Value& value, TensorKind kind) {
  switch (value.kind()) {
    case Value::Kind::kNull:
      return py::none();
    case Value::Kind::kBool:
      return py::bool_(value.as_bool());
    case Value::Kind::kInt:
      return py::int_(value.as_int());
    case Value::Kind::kDouble:
      return py::float_(value.as_double());
    case Value::Kind::kString: {
      const std::string& s = value.as_string();
      return py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(s.data(), s.size(), "surrogateescape"));
    }
    case Value::Kind::kBytes:
      return py::bytes(value.as_bytes().data);
    case Value::Kind::kTensor:
      return FromTensor(value.as_tensor(), kind);
    case Value::Kind::kList: {
      py::list out(value.as_list().size());
      for (size_t i = 0; i < value.as_list().size(); ++i) {
        out[i] = FromValue(value.as_list()[i], kind);
      }
      return out;
    }
    case Value::Kind::kMap: {
      py::dict out;
      for (const auto& [k, v] : value.as_map())
        out[py::str(k)] = FromValue(v, kind);
      return out;
    }
    case Value::Kind::kRRef:
      break;
  }
  RRefHandle handle{ValueOrRaise(RRef::FromValue(value)), kind};
  return classes.make_rref(py::cast(std::move(handle)));
}

py::list FromValues(const std::vector<Value>& values, TensorKind kind) {
  py::list out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = FromValue(values[i], kind);
  return out;
}

absl::StatusOr<TensorKind> ParseTensorKind(absl::string_view name) {
  if (name == "numpy") return TensorKind::kNumpy;
  if (name == "torch") return TensorKind::kTorch;
  return absl::InvalidArgumentError(absl::StrCat(
      "tensor_type must be \"numpy\" or \"torch\", not \"", name, "\""));
}

absl::StatusOr<Destination> ToDestination(py::handle object,
                                          std::string label) {
  Path path{nullptr, label.c_str()};
  py::array a;
  std::optional<DType> dtype;
  if (IsTorchTensor(object)) {
    py::object t = py::reinterpret_borrow<py::object>(object);
    if (!t.attr("is_cpu").cast<bool>()) {
      return Invalid(path, "output tensors must be on the CPU");
    }
    if (!t.attr("is_contiguous")().cast<bool>()) {
      return Invalid(path, "output tensors must be contiguous");
    }
    t = t.attr("detach")();
    if (t.attr("dtype").is(Torch().attr("bfloat16"))) {
      a = t.attr("view")(Torch().attr("int16")).attr("numpy")();
      dtype = DType::kBFloat16;
    } else {
      a = t.attr("numpy")();
    }
  } else if (py::isinstance<py::array>(object)) {
    a = py::reinterpret_borrow<py::array>(object);
  } else {
    return Invalid(path, absl::StrCat("expected a numpy array or torch "
                                      "tensor to write into, got ",
                                      TypeName(object)));
  }
  const int flags = py::detail::array_proxy(a.ptr())->flags;
  if ((flags & kWriteable) == 0) return Invalid(path, "array is read-only");
  if ((flags & kCContiguous) == 0 || !NativeOrder(a.dtype())) {
    return Invalid(path, "output arrays must be C-contiguous, native order");
  }
  if (!dtype.has_value()) dtype = FromNumpyDType(a.dtype());
  if (!dtype.has_value()) {
    return Invalid(path, absl::StrCat("ferry has no dtype for numpy's ",
                                      std::string(py::str(a.dtype()))));
  }
  Destination d;
  d.label = std::move(label);
  d.dtype = *dtype;
  d.shape = ShapeOf(a);
  d.data = static_cast<char*>(a.mutable_data());
  d.nbytes = NBytes(a);
  d.keep = PyRef(a);
  d.torch = !py::isinstance<py::array>(object);
  return d;
}

}  // namespace ferry::python
