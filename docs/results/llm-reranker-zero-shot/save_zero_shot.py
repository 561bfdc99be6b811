"""The two embedded LLMs as zero-shot rerankers, saved as reranker folders (fp32, as loaded)."""
import sys
from dualview.config import validate_config
from dualview.models.config import ModelConfig
from dualview.models.reranker import build_reranker

for size in sys.argv[1:]:
    data = {
        "kind": "llm_reranker",
        "name_or_path": f"embedded:qwen2.5-coder-{size}",
        "query_template": "{query} {instruction}",
        "query_max_length": 96,
        "document_max_length": 160,
    }
    model = build_reranker(validate_config(ModelConfig, data, "zero-shot"))
    print(size, model.save(f"zs-{size}"), flush=True)
