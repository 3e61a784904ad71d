# The optional load driver (paper 6.3: one m5zn.xlarge). It sits in a public
# subnet so its load reaches the balancer's public address without NAT
# charges, but admits no inbound traffic: operators use SSM Session Manager,
# or SSH only when ssh_key_name and ssh_cidr_blocks are both set.
resource "aws_instance" "load_driver" {
  count = local.load_driver_count

  ami                         = local.ami_id
  instance_type               = var.load_driver_instance_type
  subnet_id                   = local.public_subnet_ids[0]
  associate_public_ip_address = true
  vpc_security_group_ids      = [aws_security_group.load_driver.id]
  iam_instance_profile        = aws_iam_instance_profile.node["load-driver"].name
  key_name                    = var.ssh_key_name

  user_data                   = local.load_driver_user_data
  user_data_replace_on_change = true

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = var.root_volume_size_gb
    encrypted   = true
  }

  tags = { Name = "${var.name}-load-driver", Component = "load-driver" }
}
