"""Training the road-segmentation U-Net (a development tool): hand-made drone-frame labels, data, augmentation,
training and a speed benchmark. The U-Net itself and its inference are runtime code in ``vision.road``."""
