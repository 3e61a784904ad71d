# A Chopper member group: one launch template and the autoscaling group that
# runs it. Front ends and app servers differ only in what the inputs carry
# (type, security group, role, boot script, size, load balancer), so both
# are this module; the root module calls it once per component.

resource "aws_launch_template" "this" {
  name_prefix            = "${var.name}-"
  description            = var.description
  image_id               = var.ami_id
  instance_type          = var.instance_type
  vpc_security_group_ids = var.security_group_ids
  user_data              = base64encode(var.user_data)
  update_default_version = true

  iam_instance_profile {
    arn = var.instance_profile_arn
  }

  # IMDSv2 only, and one hop: containers on the instance cannot reach the
  # role's credentials.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  block_device_mappings {
    device_name = var.root_device_name

    ebs {
      volume_type           = "gp3"
      volume_size           = var.root_volume_size_gb
      encrypted             = true
      delete_on_termination = true
    }
  }

  # Provider default_tags do not reach instances an autoscaling group
  # launches; these do.
  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { Name = var.name, Component = var.component }, var.instance_tags)
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(var.tags, { Name = var.name, Component = var.component })
  }
}

# A fixed size (min = max = desired): the experiments need a known number of
# members. A changed launch template rolls the group through an instance
# refresh, half of it at a time.
resource "aws_autoscaling_group" "this" {
  name                      = var.name
  min_size                  = var.instance_count
  max_size                  = var.instance_count
  desired_capacity          = var.instance_count
  vpc_zone_identifier       = var.subnet_ids
  target_group_arns         = var.target_group_arns
  health_check_type         = var.health_check_type
  health_check_grace_period = var.boot_grace_period_seconds

  launch_template {
    id      = aws_launch_template.this.id
    version = aws_launch_template.this.latest_version
  }

  instance_refresh {
    strategy = "Rolling"

    preferences {
      min_healthy_percentage = 50
      instance_warmup        = var.boot_grace_period_seconds
    }
  }
}
