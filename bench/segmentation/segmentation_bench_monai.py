#!/usr/bin/env python3
"""The twin of kiln_segmentation_bench in MONAI and PyTorch: the same passes, networks,
sizes and JSON line (README.md).

  --what step            forward, MONAI's DiceCELoss(to_onehot_y=True, softmax=True),
                         backward, Adam, zero_grad(set_to_none=True)
  --what sliding-window  monai.inferers.sliding_window_inference(mode="gaussian") under
                         torch.no_grad, the model in eval mode
  --model unet           monai.networks.nets.BasicUNet(3, 1, classes), MONAI's features
  --model resunet        dynamic_network_architectures' ResidualEncoderUNet, Kiln's config
  --channels-last 1      the model and inputs in channels_last_3d
  --compile default      torch.compile of the model
"""
import argparse
import json
import resource
import time

import torch


def make_model(args):
    if args.model == "unet":
        from monai.networks.nets import BasicUNet
        return BasicUNet(spatial_dims=3, in_channels=1, out_channels=args.classes)
    from dynamic_network_architectures.architectures.unet import ResidualEncoderUNet
    from torch import nn
    return ResidualEncoderUNet(1, 5, [32, 64, 128, 256, 320], nn.Conv3d, 3, [1, 2, 2, 2, 2], [1, 3, 4, 6, 6],
                               args.classes, [1, 1, 1, 1], conv_bias=True, norm_op=nn.InstanceNorm3d,
                               norm_op_kwargs={"eps": 1e-5, "affine": True}, nonlin=nn.LeakyReLU,
                               nonlin_kwargs={"inplace": True}, deep_supervision=False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--what", default="step", choices=["step", "sliding-window"])
    p.add_argument("--model", default="unet", choices=["unet", "resunet"])
    for name, default in [("batch", 2), ("patch", 64), ("volume", 192), ("roi", 96), ("sw-batch", 4), ("steps", 3),
                          ("warmup", 1), ("classes", 3), ("cuda", 0), ("channels-last", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--overlap", type=float, default=0.5)
    p.add_argument("--compile", default="none")
    args = p.parse_args()
    device = torch.device("cuda" if args.cuda else "cpu")
    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last_3d if args.channels_last else torch.contiguous_format
    model = make_model(args).to(device).to(memory_format=fmt)
    net = torch.compile(model, mode=args.compile) if args.compile != "none" else model
    g = torch.Generator().manual_seed(7)
    if args.what == "step":
        from monai.losses import DiceCELoss
        x = torch.randn(args.batch, 1, args.patch, args.patch, args.patch, generator=g).to(device).to(memory_format=fmt)
        y = torch.randint(0, args.classes, (args.batch, 1, args.patch, args.patch, args.patch), generator=g).to(device)
        loss_fn = DiceCELoss(to_onehot_y=True, softmax=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        model.train()

        def run():
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
    else:
        from monai.inferers import sliding_window_inference
        x = torch.randn(1, 1, args.volume, args.volume, args.volume, generator=g).to(device).to(memory_format=fmt)
        model.eval()

        def run():
            with torch.no_grad():
                out = sliding_window_inference(x, (args.roi,) * 3, args.sw_batch, net, overlap=args.overlap,
                                               mode="gaussian")
                out.sum().item()
    for _ in range(args.warmup):
        run()
    seconds = []
    for _ in range(args.steps):
        if args.cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        if args.cuda:
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"framework": "monai", "what": args.what, "model": args.model,
                      "parameters": sum(t.numel() for t in model.parameters()), "seconds": seconds,
                      "median_s": sorted(seconds)[len(seconds) // 2],
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                      "channels_last": bool(args.channels_last), "compile": args.compile,
                      "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
