# The controller: plain instances (not an autoscaling group) because front
# ends and app servers are configured with the active one's address. With
# controller_count > 1 the extras are spread over the other private subnets,
# ready for the standby that is still to come (see user-data.tf).
resource "aws_instance" "controller" {
  count = var.controller_count

  ami                    = local.ami_id
  instance_type          = var.controller_instance_type
  subnet_id              = element(local.private_subnet_ids, count.index)
  vpc_security_group_ids = [aws_security_group.controller.id]
  iam_instance_profile   = aws_iam_instance_profile.node["controller"].name

  # cloud-init runs user_data only on first boot: a changed script needs a
  # new instance to take effect.
  user_data                   = local.controller_user_data
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

  tags = { Name = "${var.name}-controller-${count.index}", Component = "controller" }

  # A newer Ubuntu image alone is no reason to replace the controller.
  lifecycle {
    ignore_changes = [ami]
  }
}
