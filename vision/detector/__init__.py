"""Training the shipped vehicle detector: COCO INT8 dequantisation, data set building, fine-tuning."""
