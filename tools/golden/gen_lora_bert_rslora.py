# Golden: PEFT LoRA (r=4, alpha=8, use_rslora=True) on the tiny bert classifier.
# Usage: python3 tools/golden/gen_lora_bert_rslora.py --out tests/golden/lora_bert_rslora
import golden_common as gc
import lora_golden

if __name__ == "__main__":
    lora_golden.run("bert", gc.parse_out("lora_bert_rslora golden"), rslora=True)
