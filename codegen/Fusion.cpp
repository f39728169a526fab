//===- Fusion.cpp - Grouping graph nodes into kernels ---------------------===//
//
// planFusion partitions a statically shaped graph into Kernel, Library and
// Fallback groups (codegen/Fusion.h) and records every decision with the
// rule that made it. The rules:
//
//   F1  Constants and graph inputs are not groups. Splat constants are
//       inlined into the kernels that read them as literals; other
//       constants are kernel inputs. Unused nodes are not computed.
//   F2  Library anchors (ops the backend's table, FusionOptions::library,
//       anchors) on f32 start a Library group when
//       FusionOptions::useLibraries; otherwise they are fallbacks.
//   F3  Library epilogue: the anchor's result, then each epilogue result,
//       joins the group when its single user is an epilogue op of the table
//       with the anchor's result type, the intermediate is not a graph
//       output, and a binary op's other operand comes from outside and
//       broadcasts to the anchor's result (sub and div only as
//       `chain - other` and `chain / other`).
//       Anchors are visited in graph order, so the first anchor of a
//       residual add takes it. Attention (an anchor the table marks so, a
//       matmul of two activations, neither a constant): when the group's
//       result has one user, a softmax
//       over its last axis, whose result has one user, a matmul taking it
//       as its lhs and an activation (not a constant) as its rhs, neither
//       a graph output, both join the group: scores,
//       scaling and masks (the epilogue), softmax and the weighted sum are
//       one library call (Note [Attention calls]).
//   F4  Elementwise chains: an elementwise (or batch_norm) producer joins
//       its consumers' kernel when all its users are in that kernel.
//   F5  Index maps: data movement (reshape, flatten, squeeze, unsqueeze,
//       transpose, expand, slice, concat, pad, split, gather, resize) folds
//       into its consumers as index arithmetic: joined like F4 when all
//       users are in the kernel, recomputed in each consumer kernel
//       otherwise (by F8; they cost no arithmetic, concat and pad one
//       operation per load they select from), and a copy kernel of its own
//       only when a consumer cannot take it (a library or fallback op, a
//       graph output).
//   F6  Row kernels: reduce_{sum,mean,max,min,prod}, argmax, softmax,
//       log_softmax and layer_norm are stages of a row kernel over their
//       input's shape (kept dims outside, reduced dims in the inner loop).
//       Elementwise producers join it by F4 (they are recomputed in every
//       stage that reads them), and every reduction over the same row space
//       (same input shape, same reduced dims) shares the kernel: a mean and
//       a variance, or a softmax, are one kernel. A reduction over another
//       row space is materialized by its own kernel.
//   F7  Row alignment: a reduction or normalization joins a kernel only if
//       every path from it to the kernel's outputs is elementwise ops on
//       its full input shape or on its per-row shape (broadcast with kept
//       dims of 1), so that each stage value is read at the row it was
//       computed for. Its elementwise consumers then run in the last stage
//       (full shape) or in an outer-only stage (per-row shape).
//   F8  Several consumers: a producer with users outside this kernel is
//       recomputed here if it is an index map (F5) or an elementwise node
//       whose recomputed chain costs at most kRecomputeBudget (= 8)
//       operations (transcendental primitives count 10: only cheap
//       arithmetic is recomputed), and if every operand of the recomputed
//       chain is in memory anyway (a graph input, a constant, a library or
//       fallback result, or a value some group already reads from memory):
//       recomputing must not force a new intermediate into memory. It is
//       materialized otherwise (computed once by its own kernel, stored,
//       read by the others). Reductions are never recomputed.
//   F9  Stored values: a value computed in a kernel and needed outside it
//       (a graph output, or read from memory by another group) is stored by
//       that kernel only if it has the kernel's iteration shape (pointwise)
//       or the row space's full or per-row shape; otherwise it is
//       materialized by its own kernel.
//   F10 Fallback: ops that neither a kernel nor a library handles (shape,
//       range, constant_of_shape left unfolded, library ops on non-f32
//       dtypes or without libraries) run their reference kernel as a group
//       of their own.
//
// Algorithm: library groups first (F2, F3, graph order); then the other
// nodes in reverse graph order: each node no group owns seeds a group,
// which grows upward through its producers in decreasing graph position
// (so a producer is decided after all its users in the group are known).
// A node is *owned* by at most one group; recomputed nodes are copied into
// other kernels. Finally groups are ordered topologically by what they
// read. See lowerGroup (Lower.cpp) for how a Kernel group becomes a kernel.
//
//===----------------------------------------------------------------------===//
#include "codegen/Fusion.h"
#include "codegen/Internal.h"
#include "ir/Printer.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_set>

namespace kiln::codegen {

using detail::RowSpace;
using detail::sizesOf;

namespace {

constexpr int64_t kRecomputeBudget = 8;

enum class Role { None, Kernel, Library, Fallback };

/// What a candidate producer does in a growing kernel group.
enum class Verdict { Own, Recompute, Reject };

struct GroupState {
  FusionGroup::Kind kind = FusionGroup::Kind::Kernel;
  std::set<int> owned, recomputed; // node positions
  std::vector<const Value *> libraryInputs;
  std::vector<const Value *> outputs;
  std::optional<RowSpace> space;
  std::vector<int64_t> domain;
  std::map<int, int64_t> chainCost; // recomputed node -> cost of its chain
  int seed = 0;
  std::string reason; // Fallback groups: why nothing compiles the node
};

class Planner {
public:
  /// `fuse` false: one group per node (the safe plan used when the fused
  /// one is inconsistent, which is a bug of this file).
  Planner(const Graph &g, const FusionOptions &opts, bool fuse = true)
      : g_(g), opts_(opts), fuse_(fuse) {
    for (Node *n : g.nodes()) {
      pos_[n] = static_cast<int>(order_.size());
      order_.push_back(n);
    }
    owner_.assign(order_.size(), -1);
    live_.assign(order_.size(), false);
    recomputedSomewhere_.assign(order_.size(), false);
    names_ = detail::valueNames(g);
    for (Value *v : g.outputs())
      graphOutputs_.insert(v);
    // A node is live when a graph output depends on it.
    for (size_t i = order_.size(); i-- > 0;) {
      const Node *n = order_[i];
      for (unsigned r = 0; r < n->numResults() && !live_[i]; ++r) {
        if (graphOutputs_.count(n->result(r)))
          live_[i] = true;
        for (const Use &u : n->result(r)->uses())
          if (live_[static_cast<size_t>(pos_.at(u.user))])
            live_[i] = true;
      }
    }
  }

  FailureOr<FusionPlan> run(DiagnosticEngine &diag);
  const std::string &internalError() const { return internalError_; }

private:
  Role roleOf(const Node &n) const;
  bool libraryAnchors(OpKind k) const { return opts_.library && opts_.library->anchors(k); }
  void planLibrary(int anchor);
  /// Extends library group `g`, whose result is `scores`, by attention's
  /// softmax and weighted sum when they follow; returns the group's result.
  const Value *planAttention(GroupState &g, const Value *scores);
  void planFallback(int at);
  void planKernel(int at, const Value *seedValue, bool own);
  Verdict decide(GroupState &g, int p, std::string &rule, std::string &reason);
  bool alignedInto(const GroupState &g, int p, std::string &reason);
  bool storable(const GroupState &g, const Value *v) const;
  /// Whether `v` is in memory whatever this kernel does.
  bool isMaterialized(const Value *v) const;
  /// Whether `p` can be recomputed within `budget` without materializing
  /// anything new; otherwise `blocker` says why not.
  bool recomputable(int p, int64_t budget, int depth, std::string &blocker) const;
  bool needsStore(const Value *v) const { return graphOutputs_.count(v) || needsMemory_.count(v); }
  std::vector<int> usersOf(int p) const;
  std::string name(const Value *v) const { return names_.at(v); }
  std::string nodeName(int p) const { return name(order_[static_cast<size_t>(p)]->result(0)); }
  void record(int key, std::string producer, std::string consumer, bool fused, std::string rule,
              std::string reason) {
    decisions_.push_back(
        {key,
         {std::move(producer), std::move(consumer), fused, std::move(rule), std::move(reason)}});
  }
  FusionGroup finish(const GroupState &g) const;

  const Graph &g_;
  const FusionOptions &opts_;
  bool fuse_;
  /// Set instead of failing when the plan is inconsistent.
  std::string internalError_;
  std::vector<const Node *> order_;
  std::unordered_map<const Node *, int> pos_;
  std::vector<int> owner_;
  std::vector<bool> recomputedSomewhere_, live_;
  std::unordered_set<const Value *> needsMemory_, graphOutputs_;
  std::unordered_map<const Value *, std::string> names_;
  std::vector<GroupState> groups_;
  std::vector<std::pair<int, FusionDecision>> decisions_;
};

Role Planner::roleOf(const Node &n) const {
  if (n.kind() == OpKind::Constant)
    return Role::None;
  if (libraryAnchors(n.kind()))
    return opts_.useLibraries && n.result(0)->type().dtype == DType::F32 ? Role::Library
                                                                         : Role::Fallback;
  if (detail::isPointwiseNode(n) || detail::isIndexMapNode(n) || detail::isStageNode(n))
    return Role::Kernel;
  return Role::Fallback;
}

std::vector<int> Planner::usersOf(int p) const {
  std::vector<int> users;
  const Node *n = order_[static_cast<size_t>(p)];
  for (unsigned r = 0; r < n->numResults(); ++r)
    for (const Use &u : n->result(r)->uses())
      users.push_back(pos_.at(u.user));
  std::sort(users.begin(), users.end());
  users.erase(std::unique(users.begin(), users.end()), users.end());
  return users;
}

/// Whether `shape` broadcasts (numpy, one direction) to `target`.
bool broadcastsTo(const std::vector<int64_t> &shape, const std::vector<int64_t> &target) {
  if (shape.size() > target.size())
    return false;
  size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && shape[d] != target[lead + d])
      return false;
  return true;
}

void Planner::planLibrary(int anchor) {
  GroupState g;
  g.kind = FusionGroup::Kind::Library;
  g.seed = anchor;
  const Node *a = order_[static_cast<size_t>(anchor)];
  g.owned.insert(anchor);
  owner_[static_cast<size_t>(anchor)] = static_cast<int>(groups_.size());
  for (Value *v : a->operands())
    g.libraryInputs.push_back(v);
  record(anchor, name(a->result(0)), "", true, "F2 library anchor",
         "'" + std::string(a->mnemonic()) + "' runs in the library");
  const Value *tail = a->result(0);
  const TensorType &anchorType = tail->type();
  // An anchor with several results (a recurrent layer) takes no epilogue.
  while (fuse_ && a->numResults() == 1) {
    const std::vector<Use> &uses = tail->uses();
    if (uses.empty())
      break;
    const Node *u = uses.front().user;
    std::string why;
    if (graphOutputs_.count(tail))
      why = "the result is a graph output";
    else if (uses.size() != 1)
      why = "the result has " + std::to_string(uses.size()) + " users";
    else if (!opts_.library->takesEpilogue(u->kind()))
      why = "'" + std::string(u->mnemonic()) + "' is not an epilogue op";
    else if (owner_[static_cast<size_t>(pos_.at(u))] != -1)
      why = "the user is already in another library group";
    else if (u->result(0)->type() != anchorType)
      why = "the epilogue changes the type to " + u->result(0)->type().str();
    else if (opts_.acceptEpilogue && !opts_.acceptEpilogue(*a, *u, g.owned.size() - 1))
      why = "the library call takes no such epilogue there";
    const Value *other = nullptr;
    if (why.empty() && u->numOperands() == 2) {
      unsigned chainAt = u->operand(0) == tail ? 0 : 1;
      other = u->operand(1 - chainAt);
      if (other == tail)
        why = "both operands are the chain value";
      else if ((u->kind() == OpKind::Sub || u->kind() == OpKind::Div) && chainAt != 0)
        why = std::string(u->mnemonic()) + " with the chain value as its second operand";
      else if (other->type().dtype != anchorType.dtype ||
               !broadcastsTo(sizesOf(other), sizesOf(tail)))
        why = "operand " + other->type().str() + " does not broadcast to " + anchorType.str();
    }
    if (!why.empty()) {
      // Only refusals of epilogue ops are news; other users explain
      // themselves when their kernel considers this producer.
      if (opts_.library->takesEpilogue(u->kind()))
        record(pos_.at(u), name(tail), name(u->result(0)), false, "F3 library epilogue", why);
      break;
    }
    int up = pos_.at(u);
    g.owned.insert(up);
    owner_[static_cast<size_t>(up)] = static_cast<int>(groups_.size());
    if (other)
      g.libraryInputs.push_back(other);
    record(up, name(tail), name(u->result(0)), true, "F3 library epilogue",
           "'" + std::string(u->mnemonic()) + "' applied as a post-op");
    tail = u->result(0);
  }
  if (fuse_ && opts_.library->attention(a->kind()))
    tail = planAttention(g, tail);
  g.outputs.push_back(tail);
  for (unsigned r = 1; r < a->numResults(); ++r)
    g.outputs.push_back(a->result(r));
  for (const Value *v : g.libraryInputs)
    needsMemory_.insert(v);
  groups_.push_back(std::move(g));
}

// Note [Attention calls]
// The attention a transformer exports (q k^T, scaled, masked, softmax over
// the keys, times v) is a matmul anchor with a mul/add epilogue, a softmax
// and a second matmul. Planned as one library group (F3), the backend runs
// it as one call whose scores no other step reads (codegen/cpu/dnnl/
// Attention.cpp); a backend that cannot (another epilogue, a refusal)
// splits it back into the anchor's call and ordinary groups.
const Value *Planner::planAttention(GroupState &g, const Value *scores) {
  auto soleUser = [&](const Value *v) -> const Node * {
    if (graphOutputs_.count(v) || v->uses().size() != 1)
      return nullptr;
    const Node *u = v->uses().front().user;
    return owner_[static_cast<size_t>(pos_.at(u))] == -1 ? u : nullptr;
  };
  // Attention multiplies activations: a matmul with a constant operand (a
  // linear layer followed by a softmax) is not one.
  auto isConstant = [](const Value *v) {
    return v->definingNode() && v->definingNode()->kind() == OpKind::Constant;
  };
  const Node *first = order_[static_cast<size_t>(g.seed)];
  if (isConstant(first->operand(0)) || isConstant(first->operand(1)))
    return scores;
  const Node *softmax = soleUser(scores);
  if (!softmax || softmax->kind() != OpKind::Softmax)
    return scores;
  const int64_t rank = scores->type().rank(), axis = SoftmaxOp(*softmax).axis();
  if (rank < 2 || (axis != -1 && axis != rank - 1))
    return scores;
  const Node *weighted = soleUser(softmax->result(0));
  if (!weighted || weighted->kind() != OpKind::MatMul ||
      weighted->operand(0) != softmax->result(0) || weighted->operand(1) == softmax->result(0) ||
      isConstant(weighted->operand(1)) || weighted->result(0)->type().dtype != DType::F32)
    return scores;
  for (const Node *n : {softmax, weighted}) {
    int at = pos_.at(n);
    g.owned.insert(at);
    owner_[static_cast<size_t>(at)] = static_cast<int>(groups_.size());
  }
  g.libraryInputs.push_back(weighted->operand(1));
  record(pos_.at(softmax), name(scores), name(softmax->result(0)), true, "F3 library attention",
         "the softmax of the scores");
  record(pos_.at(weighted), name(softmax->result(0)), name(weighted->result(0)), true,
         "F3 library attention", "the weighted sum of the values");
  return weighted->result(0);
}

void Planner::planFallback(int at) {
  GroupState g;
  g.kind = FusionGroup::Kind::Fallback;
  g.seed = at;
  const Node *n = order_[static_cast<size_t>(at)];
  g.owned.insert(at);
  owner_[static_cast<size_t>(at)] = static_cast<int>(groups_.size());
  for (Value *v : n->operands()) {
    g.libraryInputs.push_back(v);
    needsMemory_.insert(v);
  }
  for (unsigned r = 0; r < n->numResults(); ++r)
    g.outputs.push_back(n->result(r));
  std::string why =
      libraryAnchors(n->kind())
          ? (opts_.useLibraries ? "library ops take f32, got " + n->result(0)->type().str()
                                : std::string("libraries are disabled"))
      : n->kind() == OpKind::Resize
          ? "an element reads more than " + std::to_string(detail::kMaxResizeTaps) +
                " inputs (an antialiased downscale)"
          : "no kernel lowering for '" + std::string(n->mnemonic()) + "'";
  record(at, name(n->result(0)), "", false, "F10 fallback", "reference kernel: " + why);
  g.reason = why;
  groups_.push_back(std::move(g));
}

bool Planner::storable(const GroupState &g, const Value *v) const {
  std::vector<int64_t> shape = sizesOf(v);
  if (g.space)
    return shape == g.space->shape || g.space->isRowShape(shape);
  return shape == g.domain;
}

/// F6/F7 for a reduction or normalization `p` joining `g`.
bool Planner::alignedInto(const GroupState &g, int p, std::string &reason) {
  const Node *n = order_[static_cast<size_t>(p)];
  std::optional<RowSpace> sp = detail::rowSpaceOf(*n);
  if (!sp) {
    reason = "its row space is unknown";
    return false;
  }
  bool normalization = n->kind() == OpKind::Softmax || n->kind() == OpKind::LogSoftmax ||
                       n->kind() == OpKind::LayerNorm;
  if (g.space) {
    if (*g.space != *sp) {
      reason = "it reduces " + sizesStr(sp->shape) + " over other dims than the kernel's " +
               sizesStr(g.space->shape);
      return false;
    }
  } else if (g.domain != sp->shape && (normalization || !sp->isRowShape(g.domain))) {
    reason = "the kernel iterates " + sizesStr(g.domain) + ", not its rows";
    return false;
  }
  std::vector<int64_t> kept = sp->keptShape();
  auto levelOf = [&](const Value *v) {
    std::vector<int64_t> s = sizesOf(v);
    return s == sp->shape ? 2 : sp->isRowShape(s) ? 1 : 0; // 2 full, 1 row
  };
  // Walk the members that depend on p.
  std::set<int> desc;
  std::vector<int> work{p};
  while (!work.empty()) {
    int x = work.back();
    work.pop_back();
    for (int u : usersOf(x)) {
      if (!(g.owned.count(u) || g.recomputed.count(u)) || !desc.insert(u).second)
        continue;
      work.push_back(u);
    }
  }
  for (int d : desc) {
    const Node *m = order_[static_cast<size_t>(d)];
    std::string at = "'" + std::string(m->mnemonic()) + "' " + valueRef(name(m->result(0)));
    if (detail::isStageNode(*m)) {
      if (detail::rowSpaceOf(*m) != sp) {
        reason = at + " reduces another row space";
        return false;
      }
      continue;
    }
    if (!detail::isPointwiseNode(*m)) {
      reason = at + " rearranges the rows between it and the kernel's outputs";
      return false;
    }
    int level = levelOf(m->result(0));
    if (level == 0) {
      reason = at + " has shape " + m->result(0)->type().str() + ", neither full nor per-row";
      return false;
    }
    for (const Value *o : m->operands()) {
      const Node *def = o->definingNode();
      if (!def || !(def == n || desc.count(pos_.at(def))))
        continue;
      bool ok = level == 2 ? (levelOf(o) == 2 || sizesOf(o) == kept)
                           : sizesOf(o) == sizesOf(m->result(0));
      if (!ok) {
        reason =
            at + " broadcasts per-row values of shape " + o->type().str() + " against other dims";
        return false;
      }
    }
  }
  return true;
}

Verdict Planner::decide(GroupState &g, int p, std::string &rule, std::string &reason) {
  const Node *n = order_[static_cast<size_t>(p)];
  if (!fuse_) {
    rule = "F0 safe mode";
    reason = "fusion is off";
    return Verdict::Reject;
  }
  if (owner_[static_cast<size_t>(p)] != -1) {
    const GroupState &other = groups_[static_cast<size_t>(owner_[static_cast<size_t>(p)])];
    rule = other.kind == FusionGroup::Kind::Library    ? "F2 library anchor"
           : other.kind == FusionGroup::Kind::Fallback ? "F10 fallback"
                                                       : "F8 multi-consumer";
    reason = "computed by the " +
             std::string(other.kind == FusionGroup::Kind::Library    ? "library group"
                         : other.kind == FusionGroup::Kind::Fallback ? "fallback"
                                                                     : "kernel") +
             " of " + valueRef(nodeName(other.seed));
    return Verdict::Reject;
  }
  Role role = roleOf(*n);
  if (role != Role::Kernel) {
    rule = role == Role::Library ? "F2 library anchor" : "F10 fallback";
    reason = "not fusible into a kernel";
    return Verdict::Reject;
  }
  bool stage = detail::isStageNode(*n), indexMap = detail::isIndexMapNode(*n);
  rule = stage ? "F6 row kernel" : indexMap ? "F5 index map" : "F4 elementwise chain";
  if (stage && !alignedInto(g, p, reason)) {
    rule = "F7 row alignment";
    return Verdict::Reject;
  }
  std::vector<int> users = usersOf(p);
  bool allOwned = std::all_of(users.begin(), users.end(), [&](int u) { return g.owned.count(u); });
  bool store = false;
  for (unsigned r = 0; r < n->numResults(); ++r)
    store = store || needsStore(n->result(r));
  if (allOwned) {
    if (store) {
      for (unsigned r = 0; r < n->numResults(); ++r)
        if (needsStore(n->result(r)) && !storable(g, n->result(r))) {
          rule = "F9 stored shape";
          reason = "its result " + n->result(r)->type().str() +
                   " is needed in memory but the kernel iterates " +
                   sizesStr(g.space ? g.space->shape : g.domain);
          return Verdict::Reject;
        }
      reason = "all users in this kernel; stored here for users outside";
    } else {
      reason = "all users in this kernel";
    }
    return Verdict::Own;
  }
  // Some users are in other groups (or recompute it themselves).
  if (stage) {
    rule = "F8 multi-consumer";
    reason = "a reduction with users in other kernels is materialized";
    return Verdict::Reject;
  }
  int64_t chain = 0;
  for (int u : users)
    if (auto it = g.chainCost.find(u); it != g.chainCost.end())
      chain = std::max(chain, it->second);
  int64_t cost = detail::pointwiseCost(*n);
  rule = indexMap ? "F5 index map" : "F8 multi-consumer";
  std::string blocker;
  if (recomputable(p, kRecomputeBudget - chain, 0, blocker)) {
    g.chainCost[p] = cost + chain;
    reason = indexMap ? "users in other kernels too: recomputed here (index arithmetic only)"
                      : "users in other kernels too: recomputed here (cost " +
                            std::to_string(cost + chain) +
                            " <= " + std::to_string(kRecomputeBudget) + ")";
    return Verdict::Recompute;
  }
  rule = "F8 multi-consumer";
  reason = "users in other kernels too: materialized (" + blocker + ")";
  return Verdict::Reject;
}

bool Planner::isMaterialized(const Value *v) const {
  const Node *def = v->definingNode();
  if (!def || def->kind() == OpKind::Constant || needsStore(v))
    return true;
  if (int o = owner_[static_cast<size_t>(pos_.at(def))]; o != -1) {
    const GroupState &g = groups_[static_cast<size_t>(o)];
    return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
  }
  return roleOf(*def) != Role::Kernel; // fallback results are in memory
}

bool Planner::recomputable(int p, int64_t budget, int depth, std::string &blocker) const {
  const Node *n = order_[static_cast<size_t>(p)];
  std::string at = valueRef(nodeName(p));
  if (depth > 32) {
    blocker = "the chain to recompute is too long";
    return false;
  }
  if (owner_[static_cast<size_t>(p)] != -1 || roleOf(*n) != Role::Kernel ||
      detail::isStageNode(*n)) {
    blocker = at + " is computed elsewhere";
    return false;
  }
  int64_t cost = detail::pointwiseCost(*n);
  if (cost > budget) {
    blocker = "recomputing " + at + " costs " + std::to_string(cost) + " > " +
              std::to_string(budget) + " left of " + std::to_string(kRecomputeBudget);
    return false;
  }
  // Recomputing must not make a value that nobody stores yet go to memory:
  // each operand is in memory already or is itself recomputed.
  for (const Value *o : n->operands()) {
    if (isMaterialized(o))
      continue;
    if (!recomputable(pos_.at(o->definingNode()), budget - cost, depth + 1, blocker))
      return false;
  }
  return true;
}

void Planner::planKernel(int at, const Value *seedValue, bool own) {
  int index = static_cast<int>(groups_.size());
  GroupState g;
  g.seed = at;
  const Node *seed = order_[static_cast<size_t>(at)];
  g.domain = sizesOf(seedValue);
  if (detail::isStageNode(*seed))
    g.space = detail::rowSpaceOf(*seed);
  if (own) {
    g.owned.insert(at);
    owner_[static_cast<size_t>(at)] = index;
  } else {
    g.recomputed.insert(at);
    recomputedSomewhere_[static_cast<size_t>(at)] = true;
  }
  g.outputs.push_back(seedValue);
  std::string kind = detail::isStageNode(*seed)      ? "row kernel"
                     : detail::isIndexMapNode(*seed) ? "copy kernel"
                                                     : "kernel";
  std::string why =
      graphOutputs_.count(seedValue) ? "a graph output" : "read from memory by other groups";
  record(at, name(seedValue), "", true,
         detail::isIndexMapNode(*seed) ? "F5 index map"
         : detail::isStageNode(*seed)  ? "F6 row kernel"
                                       : "F4 elementwise chain",
         "starts a " + kind + " (" + why + ")");

  std::priority_queue<int> work;
  std::set<int> queued;
  auto pushProducers = [&](int x) {
    for (const Value *v : order_[static_cast<size_t>(x)]->operands()) {
      const Node *def = v->definingNode();
      if (!def || def->kind() == OpKind::Constant)
        continue;
      int p = pos_.at(def);
      if (queued.insert(p).second)
        work.push(p);
    }
  };
  pushProducers(at);
  while (!work.empty()) {
    int p = work.top();
    work.pop();
    if (g.owned.count(p) || g.recomputed.count(p))
      continue;
    std::string rule, reason;
    Verdict v = decide(g, p, rule, reason);
    // The consumer named in the decision: the first member using p.
    int consumer = -1;
    for (int u : usersOf(p))
      if (g.owned.count(u) || g.recomputed.count(u)) {
        consumer = u;
        break;
      }
    record(p, nodeName(p), consumer >= 0 ? nodeName(consumer) : "", v != Verdict::Reject, rule,
           reason);
    if (v == Verdict::Reject)
      continue;
    if (v == Verdict::Own) {
      const Node *pn = order_[static_cast<size_t>(p)];
      if (detail::isStageNode(*pn) && !g.space)
        g.space = detail::rowSpaceOf(*pn);
      g.owned.insert(p);
      owner_[static_cast<size_t>(p)] = index;
      for (unsigned r = 0; r < pn->numResults(); ++r)
        if (needsStore(pn->result(r)))
          g.outputs.push_back(pn->result(r));
    } else {
      g.recomputed.insert(p);
      recomputedSomewhere_[static_cast<size_t>(p)] = true;
    }
    pushProducers(p);
  }
  // Inputs: what members read from outside; they must be in memory.
  for (const std::set<int> *members : {&g.owned, &g.recomputed})
    for (int m : *members)
      for (const Value *v : order_[static_cast<size_t>(m)]->operands()) {
        const Node *def = v->definingNode();
        if (def && (g.owned.count(pos_.at(def)) || g.recomputed.count(pos_.at(def))))
          continue;
        if (detail::isSplatConstant(v))
          continue;
        needsMemory_.insert(v);
      }
  groups_.push_back(std::move(g));
}

FusionGroup Planner::finish(const GroupState &g) const {
  FusionGroup out;
  out.kind = g.kind;
  out.reason = g.reason;
  for (int p : g.owned)
    out.nodes.push_back(order_[static_cast<size_t>(p)]);
  for (int p : g.recomputed)
    out.recomputed.push_back(order_[static_cast<size_t>(p)]);
  std::set<const Value *> seen;
  auto addInput = [&](const Value *v) {
    if (seen.insert(v).second)
      out.inputs.push_back(v);
  };
  if (g.kind == FusionGroup::Kind::Kernel) {
    std::vector<int> all(g.owned.begin(), g.owned.end());
    all.insert(all.end(), g.recomputed.begin(), g.recomputed.end());
    std::sort(all.begin(), all.end());
    for (int m : all)
      for (const Value *v : order_[static_cast<size_t>(m)]->operands()) {
        const Node *def = v->definingNode();
        if (def && (g.owned.count(pos_.at(def)) || g.recomputed.count(pos_.at(def))))
          continue;
        if (detail::isSplatConstant(v))
          continue;
        addInput(v);
      }
  } else {
    for (const Value *v : g.libraryInputs)
      addInput(v);
  }
  // Outputs in graph order (the seed's value first for kernels is not
  // needed: order by defining position, then result index).
  out.outputs = g.outputs;
  std::stable_sort(out.outputs.begin(), out.outputs.end(), [&](const Value *a, const Value *b) {
    int pa = pos_.at(a->definingNode()), pb = pos_.at(b->definingNode());
    return pa != pb ? pa < pb : a->index() < b->index();
  });
  out.outputs.erase(std::unique(out.outputs.begin(), out.outputs.end()), out.outputs.end());
  return out;
}

FailureOr<FusionPlan> Planner::run(DiagnosticEngine &diag) {
  for (Value *v : g_.inputs())
    if (!v->type().isStatic())
      return diag.emitError(Location()) << "fusion needs static shapes, but input "
                                        << valueRef(name(v)) << " has type " << v->type().str();
  for (const Node *n : order_)
    for (unsigned r = 0; r < n->numResults(); ++r)
      if (!n->result(r)->type().isStatic())
        return diag.emitError(n->loc())
               << "fusion needs static shapes, but " << valueRef(name(n->result(r))) << " has type "
               << n->result(r)->type().str();

  // F2, F3: library groups in graph order.
  for (int i = 0; i < static_cast<int>(order_.size()); ++i)
    if (owner_[static_cast<size_t>(i)] == -1 &&
        roleOf(*order_[static_cast<size_t>(i)]) == Role::Library)
      planLibrary(i);

  // Everything else, consumers first.
  for (int i = static_cast<int>(order_.size()); i-- > 0;) {
    const Node *n = order_[static_cast<size_t>(i)];
    if (owner_[static_cast<size_t>(i)] != -1 || n->kind() == OpKind::Constant)
      continue;
    std::vector<const Value *> needed;
    for (unsigned r = 0; r < n->numResults(); ++r)
      if (needsStore(n->result(r)))
        needed.push_back(n->result(r));
    if (!live_[static_cast<size_t>(i)]) {
      record(i, name(n->result(0)), "", false, "F1 not a group", "unused: not computed");
      continue;
    }
    if (recomputedSomewhere_[static_cast<size_t>(i)] && needed.empty()) {
      record(i, name(n->result(0)), "", true, "F8 multi-consumer",
             "recomputed by every consumer; never stored");
      continue;
    }
    Role role = roleOf(*n);
    if (role == Role::Fallback) {
      planFallback(i);
      continue;
    }
    KILN_ASSERT(role == Role::Kernel && !needed.empty() && "unowned node nobody reads");
    // A node with several results in memory (split) seeds one kernel per
    // result. The ones that only recompute it go first, so that what they
    // read from memory is known when the owning kernel decides what it
    // stores.
    for (size_t k = needed.size(); k-- > 0;)
      planKernel(i, needed[k], /*own=*/k == 0);
  }

  // Order groups: each after the owners of its inputs.
  std::vector<FusionGroup> finished;
  for (const GroupState &g : groups_)
    finished.push_back(finish(g));
  size_t ng = finished.size();
  std::unordered_map<const Value *, size_t> producer;
  for (size_t gi = 0; gi < ng; ++gi)
    for (const Value *v : finished[gi].outputs)
      producer[v] = gi;
  std::vector<std::set<size_t>> deps(ng);
  std::vector<std::vector<size_t>> dependents(ng);
  for (size_t gi = 0; gi < ng; ++gi)
    for (const Value *v : finished[gi].inputs) {
      const Node *def = v->definingNode();
      if (!def || def->kind() == OpKind::Constant)
        continue;
      auto it = producer.find(v);
      if (it == producer.end()) {
        internalError_ = "fusion left " + valueRef(name(v)) + " unmaterialized";
        return failure();
      }
      size_t o = it->second;
      if (o != gi && deps[gi].insert(o).second)
        dependents[o].push_back(gi);
    }
  auto key = [&](size_t gi) { return groups_[gi].seed; };
  auto cmp = [&](size_t a, size_t b) { return key(a) > key(b); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(cmp)> ready(cmp);
  std::vector<size_t> pending(ng);
  for (size_t gi = 0; gi < ng; ++gi)
    if ((pending[gi] = deps[gi].size()) == 0)
      ready.push(gi);
  FusionPlan plan;
  while (!ready.empty()) {
    size_t gi = ready.top();
    ready.pop();
    plan.groups.push_back(std::move(finished[gi]));
    for (size_t d : dependents[gi])
      if (--pending[d] == 0)
        ready.push(d);
  }
  if (plan.groups.size() != ng) {
    internalError_ = "fusion groups form a cycle";
    return failure();
  }
  std::stable_sort(decisions_.begin(), decisions_.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (auto &d : decisions_)
    plan.decisions.push_back(std::move(d.second));
  return plan;
}

const char *kindName(FusionGroup::Kind k) {
  switch (k) {
  case FusionGroup::Kind::Kernel:
    return "kernel";
  case FusionGroup::Kind::Library:
    return "library";
  case FusionGroup::Kind::Fallback:
    return "fallback";
  }
  return "?";
}

} // namespace

FailureOr<FusionPlan> planFusion(const Graph &g, const FusionOptions &opts,
                                 DiagnosticEngine &diag) {
  Planner planner(g, opts, opts.fuse);
  auto plan = planner.run(diag);
  if (plan.succeeded() || planner.internalError().empty())
    return plan;
  // A bug of the planner: run unfused rather than not at all.
  diag.emitWarning(Location()) << "internal error in fusion (" << planner.internalError()
                               << "); compiling one kernel per node";
  Planner safe(g, opts, /*fuse=*/false);
  return safe.run(diag);
}

std::string FusionPlan::explain() const {
  std::ostringstream os;
  const Graph *graph = nullptr;
  for (const FusionGroup &grp : groups)
    if (!grp.nodes.empty()) {
      graph = grp.nodes.front()->graph();
      break;
    }
  if (graph) {
    auto names = detail::valueNames(*graph);
    auto ref = [&](const Value *v) { return valueRef(names[v]); };
    for (size_t i = 0; i < groups.size(); ++i) {
      const FusionGroup &grp = groups[i];
      os << "group " << i << " " << kindName(grp.kind) << ":";
      for (const Node *n : grp.nodes)
        os << " " << ref(n->result(0)) << " (" << n->mnemonic() << ")";
      if (!grp.recomputed.empty()) {
        os << " recomputes";
        for (const Node *n : grp.recomputed)
          os << " " << ref(n->result(0)) << " (" << n->mnemonic() << ")";
      }
      os << " <-";
      for (const Value *v : grp.inputs)
        os << " " << ref(v);
      os << " ->";
      for (const Value *v : grp.outputs)
        os << " " << ref(v);
      os << "\n";
    }
  }
  // Edges print as `fuse %producer -> %consumer` or `keep ...` (not fused);
  // decisions about one node as `node %name`.
  for (const FusionDecision &d : decisions) {
    if (d.consumer.empty())
      os << "node " << valueRef(d.producer);
    else
      os << (d.fused ? "fuse " : "keep ") << valueRef(d.producer) << " -> " << valueRef(d.consumer);
    os << " [" << d.rule << "] " << d.reason << "\n";
  }
  return os.str();
}

} // namespace kiln::codegen
