# lit configuration for Tessera's IR, importer and tool tests.
import os
import lit.formats

config.name = "Tessera"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py", "unit",
                   "python", "bench", "conformance", "fuzz", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tessera_obj_root, "test")

# Tessera's tools first, then LLVM's (FileCheck, not).
config.environment["PATH"] = os.pathsep.join(
    [config.tessera_tools_dir, config.llvm_tools_dir,
     config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PYTHONPATH"] = os.path.join(
    config.test_source_root, "Importers", "ONNX", "Inputs")
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
config.substitutions.append(("%python", config.python))
