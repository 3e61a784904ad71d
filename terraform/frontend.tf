# Front ends: an autoscaling group in the private subnets behind the public
# load balancer. Its size is frontend_count; a changed launch template rolls
# the group through an instance refresh.
resource "aws_launch_template" "frontend" {
  name_prefix            = "${var.name}-frontend-"
  description            = "Chopper front end"
  image_id               = local.ami_id
  instance_type          = var.frontend_instance_type
  vpc_security_group_ids = [aws_security_group.frontend.id]
  user_data              = base64encode(local.frontend_user_data)
  update_default_version = true

  iam_instance_profile {
    arn = aws_iam_instance_profile.node["frontend"].arn
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  block_device_mappings {
    device_name = local.root_device_name

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
    tags          = merge(local.tags, { Name = "${var.name}-frontend", Component = "frontend" })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(local.tags, { Name = "${var.name}-frontend", Component = "frontend" })
  }
}

resource "aws_autoscaling_group" "frontend" {
  name                = "${var.name}-frontend"
  min_size            = var.frontend_count
  max_size            = var.frontend_count
  desired_capacity    = var.frontend_count
  vpc_zone_identifier = local.private_subnet_ids
  target_group_arns   = [aws_lb_target_group.frontend.arn]

  # The load balancer's /healthz verdict replaces instances that boot but
  # never start routing.
  health_check_type         = "ELB"
  health_check_grace_period = var.boot_grace_period_seconds

  launch_template {
    id      = aws_launch_template.frontend.id
    version = aws_launch_template.frontend.latest_version
  }

  instance_refresh {
    strategy = "Rolling"

    preferences {
      min_healthy_percentage = 50
      instance_warmup        = var.boot_grace_period_seconds
    }
  }

  # The first front ends must find the controller up to register.
  depends_on = [aws_instance.controller]
}
