//===- DiagnosticsTest.cpp - Locations and diagnostics ----------*- C++ -*-===//
#include "ir/Diagnostics.h"

#include <gtest/gtest.h>

using namespace kiln;

TEST(DiagnosticsTest, LocationForms) {
  EXPECT_EQ(Location::fileLineCol("a.kir", 3, 7).str(), "loc(\"a.kir\":3:7)");
  EXPECT_EQ(Location::name("Conv_3").str(), "loc(\"Conv_3\")");
  EXPECT_EQ(Location::name("Conv_3", "m.onnx").str(), "loc(\"Conv_3\" in \"m.onnx\")");
  EXPECT_EQ(Location().str(), "loc(unknown)");
  Location f = Location::fused({Location::name("a"), Location::fileLineCol("b", 1, 2)});
  EXPECT_EQ(f.str(), "loc(fused[\"a\", \"b\":1:2])");
  EXPECT_EQ(Location::fileLineCol("a.kir", 3, 7).diagPrefix(), "a.kir:3:7");
  EXPECT_EQ(Location::name("Conv_3", "m.onnx").diagPrefix(), "m.onnx: node 'Conv_3'");
}

TEST(DiagnosticsTest, CollectsAndFormats) {
  DiagnosticEngine diag;
  diag.addSourceFile("a.kir", "line one\n  %x = bad\n");
  std::string printed;
  {
    ScopedDiagnosticCollector c(diag);
    diag.emitError(Location::fileLineCol("a.kir", 2, 8)) << "unknown op 'bad'"
                                                         << "";
    diag.emitWarning(Location()) << "value " << 3;
    ASSERT_EQ(c.diagnostics().size(), 2u);
    EXPECT_EQ(c.diagnostics()[0].str(), "a.kir:2:8: error: unknown op 'bad'");
    EXPECT_EQ(c.diagnostics()[1].str(), "warning: value 3");
    printed = diag.format(c.diagnostics()[0]);
  }
  EXPECT_EQ(printed, "a.kir:2:8: error: unknown op 'bad'\n  %x = bad\n       ^");
  EXPECT_EQ(diag.numErrors(), 1u);
}

TEST(DiagnosticsTest, NotesAndFailureConversion) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  auto f = [&]() -> LogicalResult {
    return diag.emitError(Location::name("n")).attachNote(Location::name("m"), "defined here")
           << "bad";
  };
  EXPECT_TRUE(failed(f()));
  ASSERT_EQ(c.diagnostics().size(), 1u);
  EXPECT_EQ(c.diagnostics()[0].str(), "node 'n': error: bad\nnode 'm': note: defined here");
}
